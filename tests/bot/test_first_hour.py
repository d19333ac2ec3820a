"""The first hour (issue 14): the README's console example, check-config with `.env` and
without torch, config mistakes that used to pass, `questionbank try` on files, the CSV export
and the summary chart."""
from __future__ import annotations

import csv
import io
import os
import shlex
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.config import ConfigError, parse_config
from bot.core.answers import code_blocks, parse_answer
from bot.core.summaries import build_digest, digest_figure
from bot.platforms.console import run_console
from questionbank import jobs

from .conftest import ALICE, BOB, FAIL, MANAGER, MOD, PASS
from .helpers import code_item, output_item

ROOT = Path(__file__).resolve().parents[2]
NO_TORCH = "import sys; sys.modules['torch'] = None; from bot.__main__ import main; sys.exit(main(sys.argv[1:]))"


# ---------------------------------------------------------------- the README's scriptable example


def readme_example() -> tuple[str, list[str]]:
    """The script piped in and the console's options, as the README writes them."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    after = text.split("It is scriptable:", 1)[1]
    line = next(ln for ln in after.splitlines() if ln.startswith("printf "))
    left, right = line.split(" | ", 1)
    script = shlex.split(left)[1].encode().decode("unicode_escape")  # printf's \n
    argv = shlex.split(right)
    return script, argv[argv.index("console") + 1:]


async def test_readme_console_example_shows_what_it_promises(tmp_path, runner_client):
    script, args = readme_example()
    assert "--start" in args  # a fake clock: the scheduler's own round cannot get in the way
    args[args.index("--db") + 1] = str(tmp_path / "q.sqlite3")
    out = io.StringIO()
    assert await run_console(args, stdin=io.StringIO(script), stdout=out, runner_client=runner_client) == 0
    text = out.getvalue()
    assert text.count("Question of the day #") == 1 and "NCHW to NHWC" in text
    assert "alice, answer #1: passed" in text and "This attempt: 20 points (+5 first-solver bonus)" in text
    assert "bob, answer #2: wrong answer" in text and "shares_storage_with_input" in text
    board = text.split("Leaderboard: This week")[1].splitlines()
    assert "alice" in board[1] and "25 pts" in board[1] and "bob" in board[2]
    assert "No scores yet" not in text


# ---------------------------------------------------------------- check-config


CONFIG = """\
discord:
  enabled: true
  token_env: DISCORD_TOKEN
runners:
  remote:
  - {name: gpu-1, url: "http://runner:8700", token_env: RUNNER_TOKEN}
"""


def check_config(cfg: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DISCORD_TOKEN", "RUNNER_TOKEN")}
    return subprocess.run([sys.executable, "-c", NO_TORCH, "check-config", str(cfg), *extra], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_check_config_reads_the_env_file_next_to_the_config_without_torch(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text(CONFIG)
    missing = check_config(cfg)
    assert missing.returncode == 1
    assert "DISCORD_TOKEN is not set" in missing.stderr and "Traceback" not in missing.stderr
    # written as README step 3 shows, with comments, quotes and `export`
    (tmp_path / ".env").write_text("# secrets\nRUNNER_TOKEN=abc123\nexport DISCORD_TOKEN='xyz'\n\n")
    ok = check_config(cfg)
    assert ok.returncode == 0, ok.stderr
    assert "config.yaml: OK" in ok.stdout
    (tmp_path / ".env").write_text("RUNNER_TOKEN=abc123\n")
    half = check_config(cfg)
    assert half.returncode == 1 and f"set it in {tmp_path / '.env'}" in half.stderr


def test_readme_step_3_uses_the_working_command():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    step = text.split("**3. Configure**", 1)[1].split("**4.", 1)[0]
    assert ".venv/bin/python -m bot check-config config.yaml" in step
    assert "pip install ." in step  # validating needs no torch


# ---------------------------------------------------------------- config mistakes


def problems(raw: dict) -> list[str]:
    with pytest.raises(ConfigError) as exc:
        parse_config(raw, check_env=False)
    return exc.value.problems


def test_unquoted_time_says_how_to_write_it():
    import yaml

    raw = yaml.safe_load("schedule:\n  time: 9:00\n")
    assert raw["schedule"]["time"] == 540  # what YAML makes of it
    (msg,) = problems(raw)
    assert msg.startswith("schedule.time:") and "write it as '09:00'" in msg and "540" in msg
    (msg,) = problems(yaml.safe_load("schedule:\n  time: 17:30\n"))
    assert "write it as '17:30'" in msg
    assert parse_config({"schedule": {"time": "09:00"}}, check_env=False).core.schedule.post_time.hour == 9


def test_points_by_difficulty_needs_five_values():
    (msg,) = problems({"scoring": {"points_by_difficulty": [10, 20]}})
    assert msg.startswith("scoring.points_by_difficulty") and "five values" in msg
    assert problems({"scoring": {"channels": {"slack:T:C": {"points_by_difficulty": [1, 2, 3, 4, 5, 6]}}}})
    ok = parse_config({"scoring": {"points_by_difficulty": [1, 2, 3, 4, 5]}}, check_env=False)
    assert ok.core.scoring.base(3) == 3


# ---------------------------------------------------------------- questionbank try


def test_try_with_a_missing_file_says_so():
    res = subprocess.run([sys.executable, "-m", "questionbank", "try", "nchw-to-nhwc-view", "missing.py"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    assert "cannot read the answer file missing.py: No such file or directory" in res.stderr


def test_try_reads_a_markdown_answer_as_chat_does():
    md = "Here is my answer:\n\n```python\ndef solve(x):\n    return x * 2\n```\nand a helper:\n```\ny = 1\n```\n"
    assert jobs.answer_text(md, "code") == parse_answer(md, code_item("c")).content
    assert jobs.answer_text("`torch.Size([2, 3])`", "output") == parse_answer("`torch.Size([2, 3])`",
                                                                                 output_item("o")).content
    assert code_blocks is jobs.code_blocks  # one extraction for the bot and the bank's CLI
    from questionbank.__main__ import parse_choice

    assert parse_choice(jobs.answer_text("Here is my answer:\n\n```\nB\n```\n", "choice"), "ABCD") == {"B"}
    assert parse_choice("My answer: a and c", "ABCD") == {"A", "C"}  # not M, Y, N, S, W, E, R


# ---------------------------------------------------------------- CSV export


async def test_export_rows_give_components_and_totals(make):
    from .test_rounds import code_bank

    h = await make(bank=code_bank())
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "schedule 09:00 UTC mon-fri 8h")
    for day in range(2):  # Alice solves two days running: a first-solver and a streak bonus
        h.clock.set(datetime(2025, 1, 6 + day, 9, 30, tzinfo=UTC))
        await h.svc.settle()
        await h.answer(ALICE, FAIL)
        await h.answer(ALICE, PASS)
        await h.answer(BOB, PASS)
        await h.svc.settle()
    out = (await h.cmd(MANAGER, "export week"))[0]
    assert "attempt_total" in out.text and "added_to_round" in out.text  # the message says which is which
    rows = list(csv.DictReader(io.StringIO(out.files[0].data.decode())))
    assert list(rows[0])[:10] == ["local_date", "round_id", "item_id", "chapter", "player", "user_id", "answer_id",
                                  "submitted_at", "verdict", "fraction"]
    for r in rows:
        total = float(r["attempt_points"]) + float(r["first_solver_bonus"]) + float(r["streak_bonus"])
        assert float(r["attempt_total"]) == pytest.approx(total)
    solved_tuesday = next(r for r in rows if r["player"] == "Alice" and r["solved"] == "1"
                          and r["local_date"] == "2025-01-07")
    assert float(solved_tuesday["streak_bonus"]) > 0 and float(solved_tuesday["first_solver_bonus"]) > 0
    assert float(solved_tuesday["round_total_after"]) == float(solved_tuesday["attempt_total"])
    # the per-row changes add up to the leaderboard
    added = sum(float(r["added_to_round"]) for r in rows if r["player"] == "Alice")
    assert added == pytest.approx(await h.points(ALICE, "week"))
    this_month = (await h.cmd(MANAGER, "export month"))[0].files[0].filename
    last_month = (await h.cmd(MANAGER, "export month last"))[0].files[0].filename
    assert this_month == "quiz-scores-month-2025-01-01.csv" and last_month == "quiz-scores-month-2024-12-01.csv"
    assert (await h.cmd(MANAGER, "export"))[0].files[0].filename == "quiz-scores-all.csv"


# ---------------------------------------------------------------- the summary chart


async def played_two_weeks(make):  # noqa: ANN001, ANN201
    from .test_rounds import code_bank

    h = await make(bank=code_bank())
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "schedule 09:00 UTC mon-fri 8h")
    for day in range(9):  # Mon 6 Jan .. Tue 14 Jan
        h.clock.set(datetime(2025, 1, 6, 9, 30, tzinfo=UTC) + timedelta(days=day))
        await h.svc.settle()
        await h.answer(ALICE, PASS)
        if day % 2:
            await h.answer(BOB, FAIL)
        await h.svc.settle()
    return h


async def test_summary_names_chapters_and_compares_with_the_period_before(make):
    h = await played_two_weeks(make)
    text = (await h.cmd(MANAGER, "summary week"))[0].text
    assert "ch." not in text
    assert "PyTorch fundamentals and ecosystem" in text or "Tensor operations" in text
    assert "The week before: 5 rounds, 7 answers, 2 active players" in text
    assert "Top players: 1. Alice" in text and "Bob" not in text.split("Top players")[1]


async def test_summary_chart_is_labelled(make):
    h = await played_two_weeks(make)
    ch = (await h.svc.store.channels.enabled())[0]
    week = await build_digest(h.svc.store, ch, "week", h.clock.now())
    fig = digest_figure(week)
    per_day, chapters, players = fig.axes[:3]
    assert [t.get_text() for t in per_day.get_legend().get_texts()] == ["week of 06 Jan 2025",
                                                                         "week of 13 Jan 2025"]
    assert per_day.get_ylabel() == "players who answered"
    names = " ".join(t.get_text() for t in chapters.get_yticklabels())
    assert "ch." not in names and ("Tensor" in names or "PyTorch" in names)
    assert "solved it" in chapters.get_xlabel()
    bar_labels = " ".join(t.get_text() for t in chapters.texts)
    assert " of " in bar_labels and "solved" in bar_labels
    assert players.get_title() == "Top players: points" and "Alice" in players.get_yticklabels()[0].get_text()
    assert "week of 06 Jan 2025: 5 rounds" in fig._suptitle.get_text()
    month = await build_digest(h.svc.store, ch, "month", h.clock.now())
    ticks = digest_figure(month).axes[0].get_xticklabels()
    assert 5 <= len(ticks) <= 8 and all(t.get_rotation() == 0 for t in ticks)  # readable, not 31 rotated labels
