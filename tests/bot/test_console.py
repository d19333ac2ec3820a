"""The console platform driven like a script: stdin lines in, printed bot messages out."""
from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

from bot.platforms.console import run_console, split_speaker

from .helpers import FakeRunner, MiniBank, choice_item, code_item

SCRIPT = """\
/quiz post c1
alice: ```python
def solve(x):
    return x * 2
```
bob: ```python
def solve(x):
    return x
```
bob: /quiz post
carol: `print(1)`
/quiz leaderboard
bob: /quiz me
/quiz nonsense
:advance 1d
alice: /quiz leaderboard all
"""


async def run(tmp_path: Path, script: str, *args: str, runner: FakeRunner | None = None) -> str:
    out = io.StringIO()
    bank = MiniBank.of(code_item("c1", difficulty=2), code_item("c2", difficulty=1), choice_item("q1"))
    rc = await run_console(["--db", str(tmp_path / "q.sqlite3"), "--start", "2025-01-06T06:00+00:00", *args],
                           stdin=io.StringIO(script), stdout=out, bank=bank, runner_client=runner or FakeRunner())
    assert rc == 0
    return out.getvalue()


async def test_scripted_session(tmp_path):
    text = await run(tmp_path, SCRIPT)
    assert "[bot] Question of the day #1" in text and "Title c1" in text
    assert "[bot -> alice only] Answer #1 received (code)" in text
    assert "[bot -> @alice] alice, answer #1: wrong answer" not in text
    assert "alice, answer #1: passed" in text and "bob, answer #2: wrong answer" in text
    assert "[bot -> bob only] `/quiz post` is for quiz moderators" in text
    # chatter that mentions code is not an answer: it is neither graded nor answered
    assert "Paste your code in a ```python block" not in text
    assert "carol, answer #3" not in text and "carol" not in text.split("Leaderboard")[-1]
    lb = text.split("Leaderboard: This week")[1]
    assert lb.index("alice") < lb.index("bob")
    assert "Unknown command `/quiz nonsense`" in text
    assert "[bot] Round #1 closed" in text  # the day moved on: 09:00 round replaced it, closed at 17:00
    assert "[console] now 2025-01-07T06:00+00:00" in text


async def test_state_persists_between_sessions(tmp_path):
    await run(tmp_path, "/quiz post c1\nalice: ```python\ndef solve(x):\n    return x * 2\n```\n")
    text = await run(tmp_path, "/quiz leaderboard all\n")
    assert "alice" in text and "25 pts" in text


async def test_runner_down_answers_wait_for_next_start(tmp_path):
    text = await run(tmp_path, "/quiz post c1\nalice: ```python\ndef solve(x):\n    return x * 2\n```\n",
                     runner=FakeRunner(down=True))
    assert "1 answer is still waiting for the runner (the runner is unreachable: test)" in text
    text = await run(tmp_path, ":advance 10m\n/quiz leaderboard all\n")
    assert "alice, answer #1: passed" in text and "25 pts" in text


async def test_moderator_flag_and_default_user(tmp_path):
    text = await run(tmp_path, "/quiz post\nmia: /quiz post\n", "--as", "zoe", "--moderator", "mia")
    assert "[bot -> zoe only] `/quiz post` is for quiz moderators" in text
    assert "Question of the day #1" in text


async def test_summary_and_export_write_attachments(tmp_path):
    text = await run(tmp_path, "/quiz post c1\nalice: ```python\ndef solve(x):\n    return x * 2\n```\n"
                               "/quiz summary week\n/quiz export\n")
    assert "Weekly summary for #quiz" in text
    png = tmp_path / "console-files" / "quiz-week-2025-01-06.png"
    csv = tmp_path / "console-files" / "quiz-scores-all.csv"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert csv.read_text().splitlines()[1].split(",")[4] == "alice"


def test_split_speaker():
    assert split_speaker("alice: hi there", "you") == ("alice", "hi there")
    assert split_speaker("/quiz post", "you") == ("you", "/quiz post")
    assert split_speaker("https://example.com", "you") == ("you", "https://example.com")
    assert split_speaker("bob:", "you") == ("bob", "")


def test_check_config_cli(tmp_path):
    root = Path(__file__).resolve().parents[2]
    ok = subprocess.run([sys.executable, "-m", "bot", "check-config", str(root / "config.example.yaml")],
                        cwd=root, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert "config.example.yaml: OK" in ok.stdout
    # `--config FILE`, as `run`, `health` and `backup` take it, works too
    also = subprocess.run([sys.executable, "-m", "bot", "check-config", "--config", "config.example.yaml"],
                          cwd=root, capture_output=True, text=True)
    assert also.returncode == 0 and "config.example.yaml: OK" in also.stdout, also.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("schedule:\n  timezone: Mars/Base\n  time: '9'\nscoring:\n  first_bonus: many\nwat: 1\n")
    res = subprocess.run([sys.executable, "-m", "bot", "check-config", str(bad)], cwd=root, capture_output=True,
                         text=True)
    assert res.returncode == 1
    for key in ("schedule.timezone", "schedule.time", "scoring.first_bonus", "wat"):
        assert key in res.stderr
