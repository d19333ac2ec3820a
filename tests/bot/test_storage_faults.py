"""Storage faults with real files: nothing lost, nothing stuck, plain words, one process per file.

Disk full is SQLite's own SQLITE_FULL, produced with `PRAGMA max_page_count` (the file may not
grow); read-only at run time is SQLITE_READONLY from `PRAGMA query_only`, and at start-up a real
read-only bind mount (the tests run as root, for whom file modes do not stop writes), skipped
where mounts are not allowed. Garbage, truncated and damaged files are real files.
"""
from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from bot.storage import open_database
from bot.storage.faults import StorageError

from .conftest import ALICE, BOB, CAROL, MOD, PASS

ROOT = Path(__file__).resolve().parents[2]


async def fill_up(db) -> None:
    """The disk is full from now on: the file may not grow by a single page."""
    pages = (await db.fetchone("PRAGMA page_count"))[0]
    await db.conn.execute(f"PRAGMA max_page_count = {pages}")


async def free_space(db) -> None:
    await db.conn.execute("PRAGMA max_page_count = 1073741823")


def storage_errors(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_grades_that_cannot_be_written_go_back_to_the_queue_and_are_stored_later(make, caplog):
    """Disk full while 30 answers are graded: none stays in `grading`, none is given up, the
    fault is logged once with its cause, and once there is room again each is stored and
    scored once, without asking the runner again."""
    h = await make()
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "post c1-2")
    for i in range(30):
        await h.answer((ALICE, BOB, CAROL)[i % 3], PASS)
    await fill_up(h.svc.db)
    caplog.clear()
    with caplog.at_level(logging.INFO):
        for _ in range(5):  # "disk full for 5 s"
            await h.svc.settle()
            h.clock.advance(timedelta(seconds=1))
    states = await h.svc.db.fetchall("SELECT state, COUNT(*) FROM answers GROUP BY state")
    assert {r[0]: r[1] for r in states} == {"queued": 30}
    errors = storage_errors(caplog)
    assert len(errors) == 1, [r.getMessage() for r in errors]
    text = errors[0].getMessage()
    assert "disk is full" in text and str(h.path) in text and "Free space" in text
    assert not any(r.exc_info for r in caplog.records)  # no tracebacks
    jobs = len(h.runner.jobs)
    await free_space(h.svc.db)
    h.clock.advance(timedelta(seconds=31))
    with caplog.at_level(logging.INFO):
        await h.svc.settle()
    assert await h.svc.store.answers.pending_count() == 0
    assert (await h.svc.db.fetchone("SELECT COUNT(*) FROM answers WHERE state = 'graded'"))[0] == 30
    assert (await h.svc.db.fetchone("SELECT COUNT(*) FROM scores"))[0] == 30
    assert sorted(m.data["answer_id"] for m in h.kinds("result")) == list(range(1, 31))  # each once
    assert len(h.runner.jobs) == jobs  # the grades were kept: no second runner call
    assert any("works again" in r.getMessage() for r in caplog.records)


async def test_a_write_that_fails_for_one_answer_only_still_gives_that_answer_up(make, monkeypatch):
    """The other side of the distinction: a failure that is not the storage's (one answer's
    row) gives that answer up; the rest is graded (as `_record_isolated` did already)."""
    h = await make()
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "post c1-1")
    for actor in (ALICE, BOB, CAROL):
        await h.answer(actor, PASS)
    original = h.svc.store.answers.finish_params

    def finish_params(answer_id, **kw):
        if answer_id == 2 and kw.get("state") == "graded":
            raise sqlite3.IntegrityError("simulated: CHECK constraint failed")
        return original(answer_id, **kw)

    monkeypatch.setattr(h.svc.store.answers, "finish_params", finish_params)
    await h.svc.settle()
    states = await h.svc.db.fetchall("SELECT id, state FROM answers ORDER BY id")
    assert [tuple(s) for s in states] == [(1, "graded"), (2, "abandoned"), (3, "graded")]


async def test_an_answer_on_a_full_disk_is_refused_in_plain_words_and_reads_still_work(make):
    h = await make()
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "post c1-2")
    await h.answer(ALICE, PASS)
    await h.svc.settle()
    await fill_up(h.svc.db)
    big = "```python\ndef solve(x):\n    return x * 2  # PASS\n" + "# padding\n" * 1500 + "```"
    out = await h.answer(BOB, big)
    assert out[0].kind == "error"
    assert "was not stored" in out[0].text and "disk is full" in out[0].text and str(h.path) in out[0].text
    board = await h.cmd(CAROL, "leaderboard all")  # what can be served is served
    assert [r["name"] for r in board[0].data["rows"]] == ["Alice"]
    await free_space(h.svc.db)
    assert (await h.answer(BOB, big))[0].kind == "ack"


async def test_a_read_only_database_at_run_time_answers_in_plain_words(make):
    h = await make()
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "post c1-2")
    await h.svc.db.conn.execute("PRAGMA query_only = ON")
    out = await h.answer(ALICE, PASS)
    assert out[0].kind == "error" and "read-only" in out[0].text and str(h.path) in out[0].text
    out = await h.cmd(MOD, "close")
    assert out[0].kind == "error" and "read-only" in out[0].text
    assert (await h.cmd(ALICE, "leaderboard"))[0].kind != "error"
    await h.svc.db.conn.execute("PRAGMA query_only = OFF")
    assert (await h.answer(ALICE, PASS))[0].kind == "ack"


# ---------------------------------------------------------------- start-up


async def make_db(path: Path) -> None:
    db = await open_database(path)
    async with db.transaction():
        await db.conn.execute("INSERT INTO channels (platform, workspace, channel, name, created_at)"
                              " VALUES ('t', 'w', 'c', 'n', '2025-01-01T00:00:00+00:00')")
        await db.conn.executemany("INSERT INTO players (platform, user_id, name) VALUES ('t', ?, ?)",
                                  [(f"u{i}", "x" * 200) for i in range(2000)])
    await db.close()


async def refused(path: Path) -> StorageError:
    with pytest.raises(StorageError) as info:
        db = await open_database(path)
        await db.close()
    return info.value


async def test_a_file_that_is_not_a_database_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "quiz.sqlite3"
    junk = os.urandom(3000)
    path.write_bytes(junk)
    err = await refused(path)
    assert err.kind == "notadb" and str(path) in str(err) and "not an SQLite database" in str(err)
    assert "backup" in str(err)
    assert path.read_bytes() == junk  # nothing written over it


async def test_a_truncated_database_is_refused(tmp_path):
    path = tmp_path / "quiz.sqlite3"
    await make_db(path)
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(size // 2)
    err = await refused(path)
    assert err.kind == "corrupt" and str(path) in str(err)
    assert "damaged" in str(err) and "restore the last backup" in str(err)


async def test_a_database_with_damaged_pages_is_refused(tmp_path):
    path = tmp_path / "quiz.sqlite3"
    await make_db(path)
    data = bytearray(path.read_bytes())
    page = 4096
    for p in range(3, len(data) // page - 1, 3):  # scribble over every third page after the schema
        data[p * page + 8:p * page + 200] = os.urandom(192)
    path.write_bytes(bytes(data))
    err = await refused(path)
    assert err.kind == "corrupt" and str(path) in str(err)


async def test_a_database_from_a_newer_version_is_refused(tmp_path):
    path = tmp_path / "quiz.sqlite3"
    await make_db(path)
    con = sqlite3.connect(path)
    with con:
        con.execute("INSERT INTO schema_version (version, name, applied_at) VALUES (9999, 'from_the_future', 'x')")
        con.execute("CREATE TABLE hologram_scores (id INTEGER PRIMARY KEY)")
    con.close()
    before = path.read_bytes()
    err = await refused(path)
    assert err.kind == "newer" and str(path) in str(err)
    assert "newer version" in str(err) and "9999" in str(err)
    assert path.read_bytes() == before


async def test_a_second_process_on_the_same_database_refuses_to_start(tmp_path):
    path = tmp_path / "quiz.sqlite3"
    first = await open_database(path)
    try:
        err = await refused(path)  # a second open in this process
        assert err.kind == "in_use" and f"pid {os.getpid()}" in str(err)
        proc = subprocess.run(  # and a second bot process
            [sys.executable, "-m", "bot", "console", "--db", str(path), "--no-runner"],
            input="/quiz leaderboard\n", capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert proc.returncode == 3, proc.stderr
        assert "in use by another bot process" in proc.stderr and str(path) in proc.stderr
        assert "Traceback" not in proc.stderr
    finally:
        await first.close()
    again = await open_database(path)  # the lock goes with the process (or the close)
    await again.close()


def test_the_console_on_a_garbage_file_exits_with_the_cause_and_the_fix(tmp_path):
    path = tmp_path / "quiz.sqlite3"
    path.write_bytes(b"this is my shopping list, not a quiz\n" * 100)
    proc = subprocess.run([sys.executable, "-m", "bot", "console", "--db", str(path), "--no-runner"],
                          input="/quiz leaderboard\n", capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 3
    assert str(path) in proc.stderr and "not an SQLite database" in proc.stderr
    assert "Traceback" not in proc.stderr


def can_mount() -> bool:
    if not shutil.which("unshare") or os.geteuid() != 0:
        return False
    return subprocess.run(["unshare", "-m", "sh", "-c", "mount --bind / /mnt && umount /mnt"],
                          capture_output=True).returncode == 0


@pytest.mark.skipif(not can_mount(), reason="needs root and mount namespaces for a real read-only mount")
async def test_a_read_only_database_directory_is_refused_at_start_up(tmp_path):
    """A real read-only file system (a read-only bind mount in a private mount namespace)."""
    data = tmp_path / "data"
    data.mkdir()
    path = data / "quiz.sqlite3"
    await make_db(path)
    script = (f"mount --bind {data} {data} && mount -o remount,ro,bind {data} && "
              f"exec {sys.executable} -m bot console --db {path} --no-runner")
    proc = subprocess.run(["unshare", "-m", "sh", "-c", script], input="/quiz leaderboard\n",
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 3, proc.stderr
    assert str(path) in proc.stderr and "read-only" in proc.stderr
    assert "Traceback" not in proc.stderr
