"""Storage (pragmas, migrations, unique keys) and the config loader."""
from __future__ import annotations

import os
import shutil
from datetime import date, datetime, timezone

import pytest

from bot.config import ConfigError, load_config, parse_config
from bot.storage import MIGRATIONS_DIR, open_database
from bot.storage.migrations import MigrationError


async def test_pragmas_and_migrations(tmp_path):
    db = await open_database(tmp_path / "q.sqlite3")
    try:
        assert (await db.fetchone("PRAGMA journal_mode"))[0] == "wal"
        assert (await db.fetchone("PRAGMA foreign_keys"))[0] == 1
        assert (await db.fetchone("PRAGMA busy_timeout"))[0] == 5000
        versions = [r[0] for r in await db.fetchall("SELECT version FROM schema_version ORDER BY version")]
        assert versions == list(range(1, len(list(MIGRATIONS_DIR.glob("*.sql"))) + 1))
    finally:
        await db.close()


async def test_old_database_upgrades_itself(tmp_path):
    mig = tmp_path / "migrations"
    mig.mkdir()
    shutil.copy(MIGRATIONS_DIR / "0001_initial.sql", mig)
    db = await open_database(tmp_path / "q.sqlite3", migrations_dir=mig)
    await db.close()
    (mig / "0002_add_note.sql").write_text("ALTER TABLE channels ADD COLUMN note TEXT NOT NULL DEFAULT '';\n")
    db = await open_database(tmp_path / "q.sqlite3", migrations_dir=mig)
    try:
        assert [r[0] for r in await db.fetchall("SELECT version FROM schema_version")] == [1, 2]
        cols = [r[1] for r in await db.fetchall("PRAGMA table_info(channels)")]
        assert "note" in cols
    finally:
        await db.close()
    (mig / "0003_broken.sql").write_text("ALTER TABLE nope ADD COLUMN x;\n")
    with pytest.raises(MigrationError) as err:
        await open_database(tmp_path / "q2.sqlite3", migrations_dir=mig)
    assert "0003_broken.sql" in str(err.value) and "no such table: nope" in str(err.value)


async def test_unique_keys(tmp_path):
    from bot.core.models import ChannelRef, Schedule
    from bot.storage.repos import Store

    db = await open_database(tmp_path / "q.sqlite3")
    store = Store(db)
    now = datetime(2025, 1, 6, 9, tzinfo=timezone.utc)
    try:
        async with db.transaction():
            ch = await store.channels.enable(ChannelRef("t", "w", "c"), Schedule(), now)
            a = await store.rounds.insert(channel_id=ch.id, item_id="x", local_date=date(2025, 1, 6), scheduled=True,
                                          status="closed", opened_at=now, closes_at=now)
            b = await store.rounds.insert(channel_id=ch.id, item_id="y", local_date=date(2025, 1, 6), scheduled=True,
                                          status="open", opened_at=now, closes_at=now)
            c = await store.rounds.insert(channel_id=ch.id, item_id="z", local_date=date(2025, 1, 6), scheduled=False,
                                          status="open", opened_at=now, closes_at=now)
        assert a is not None and b is None and c is not None
        import sqlite3

        with pytest.raises(sqlite3.IntegrityError):  # one open round per channel
            async with db.transaction():
                await store.rounds.insert(channel_id=ch.id, item_id="w", local_date=date(2025, 1, 7),
                                          scheduled=False, status="open", opened_at=now, closes_at=now)
    finally:
        await db.close()


def test_config_reports_every_problem_with_its_path(monkeypatch):
    monkeypatch.delenv("NOPE_TOKEN", raising=False)
    raw = {"database": {"path": 3}, "schedule": {"timezone": "Mars/Base", "days": "funday", "duration": "forever"},
           "scoring": {"first_bonus": "x", "bogus": 1, "hint_cost": 120, "channels": {"d:g:c": {"streak_cap": -1}}},
           "discord": {"enabled": True, "token_env": "NOPE_TOKEN"}, "runners": {"remote": [{"url": "ftp://x"}]},
           "roles": {"moderators": "alice"}, "extra": 1}
    with pytest.raises(ConfigError) as exc:
        parse_config(raw)
    text = str(exc.value)
    for path in ("database.path", "schedule.timezone", "schedule.days", "schedule.duration", "scoring.first_bonus",
                 "scoring.bogus", "scoring.channels.d:g:c.streak_cap", "discord.token_env: environment variable NOPE_TOKEN",
                 "runners.remote[0].url", "roles.moderators", "extra"):
        assert path in text, path
    assert text.count("scoring.bogus") == 1
    assert "hint_cost: expected a percent from 0 to 100" in text


def test_example_config_loads_and_secrets_come_from_env(monkeypatch, tmp_path):
    root = os.path.dirname(MIGRATIONS_DIR)
    cfg = load_config(os.path.join(root, "config.example.yaml"))
    assert cfg.core.scoring.first_bonus == (5, 3, 1) and not cfg.discord.enabled
    p = tmp_path / "c.yaml"
    p.write_text("runners:\n  remote:\n    - {name: gpu, url: 'http://r:8080', token_env: MY_RUNNER_TOKEN, cuda: true}\n"
                 "scoring:\n  channels:\n    'slack:T1:C1': {partial_credit: false}\n")
    with pytest.raises(ConfigError, match="MY_RUNNER_TOKEN"):
        load_config(p)
    monkeypatch.setenv("MY_RUNNER_TOKEN", "s3cret")
    cfg = load_config(p)
    assert cfg.runners[0].cuda is True and cfg.secret("MY_RUNNER_TOKEN") == "s3cret"
    assert "s3cret" not in p.read_text()
    assert cfg.core.channel_scoring == {"slack:T1:C1": {"partial_credit": False}}
    with pytest.raises(ConfigError, match="not valid YAML"):
        p.write_text("a: [\n")
        load_config(p)


def test_learning_settings_load_and_bad_ones_are_named():
    cfg = parse_config({"learning": {"review_per_day": 5, "practice_hours": 12,
                                     "digest": {"weekday": "fri", "time": "17:30"}},
                        "scoring": {"streak_freezes": 2}})
    le = cfg.core.learning
    assert (le.review_per_day, le.practice_hours, le.digest.weekday, le.digest.time) == (5, 12, 4, "17:30")
    assert cfg.core.scoring.streak_freezes == 2
    with pytest.raises(ConfigError) as err:
        parse_config({"learning": {"review_per_day": 0, "digest": {"weekday": "someday", "time": 930, "at": 1}}})
    text = str(err.value)
    for path in ("learning.review_per_day", "learning.digest.weekday", "learning.digest.time", "learning.digest.at"):
        assert path in text, (path, text)
