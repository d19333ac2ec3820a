"""Apply `migrations/NNNN_name.sql` in order and record each in `schema_version`.

An old database upgrades itself at start-up; each file runs in one transaction together
with its schema_version row, so a crash mid-migration leaves the previous version intact.
"""
from __future__ import annotations

import re
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .db import Database

class MigrationError(RuntimeError):
    """A migration file failed; the database stays at the previous version."""


MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"
_NAME = re.compile(r"^(\d{4})_([A-Za-z0-9_]+)\.sql$")


def discover(directory: Path | None = None) -> list[tuple[int, str, Path]]:
    """(version, name, path) of every migration file, sorted; a duplicate version is an error."""
    directory = directory or MIGRATIONS_DIR
    found: dict[int, tuple[int, str, Path]] = {}
    for path in sorted(directory.glob("*.sql")):
        m = _NAME.match(path.name)
        if not m:
            raise ValueError(f"{path}: migration files are named NNNN_name.sql")
        version = int(m.group(1))
        if version in found:
            raise ValueError(f"{path}: version {version} is used twice")
        found[version] = (version, m.group(2), path)
    return [found[v] for v in sorted(found)]


def _statements(sql: str) -> list[str]:
    """Split a script into statements, keeping CREATE TRIGGER ... END; blocks whole."""
    out: list[str] = []
    buf = ""
    for line in sql.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip():
                out.append(buf.strip())
            buf = ""
    if buf.strip() and not all(ln.strip().startswith("--") or not ln.strip() for ln in buf.splitlines()):
        out.append(buf.strip())
    return out


async def newer_schema(db: Database, directory: Path | None = None) -> str | None:
    """A message when the database was written by a newer version of the bot (a schema version
    this one has no migration for); None when it is older, current or new. `{path}` in the
    message stands for the file."""
    row = await db.fetchone("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'")
    if row is None:
        return None
    known = {v for v, _n, _p in discover(directory)}
    rows = await db.fetchall("SELECT version, name FROM schema_version ORDER BY version")
    unknown = [(int(r[0]), str(r[1])) for r in rows if int(r[0]) not in known]
    if not unknown:
        return None
    top = max(known) if known else 0
    names = ", ".join(f"{v:04d}_{n}" for v, n in unknown)
    return ("{path} was written by a newer version of the bot (schema " + str(max(v for v, _ in unknown))
            + f", this version knows up to {top}; unknown migrations: {names}). Refusing to start, so that "
            "nothing is written in a format this version does not know. Run the newer version of the bot, "
            "or restore a backup made before the upgrade (`python -m bot backup`).")


async def apply_migrations(db: Database, directory: Path | None = None) -> list[int]:
    """Bring the schema up to date; returns the versions applied now."""
    await db.conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_version ("
        " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
    )
    rows = await db.fetchall("SELECT version FROM schema_version")
    done = {r[0] for r in rows}
    applied: list[int] = []
    for version, name, path in discover(directory):
        if version in done:
            continue
        async with db.transaction() as conn:
            for stmt in _statements(path.read_text(encoding="utf-8")):
                try:
                    await conn.execute(stmt)
                except sqlite3.Error as e:
                    first = stmt.splitlines()[0][:80]
                    raise MigrationError(f"{path.name}: {e} (in `{first}`); the database is left at the "
                                         "previous version") from e
            await conn.execute(
                "INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, ?)",
                (version, name, datetime.now(UTC).isoformat()),
            )
        applied.append(version)
    return applied
