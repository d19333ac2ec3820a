"""One aiosqlite connection per process with a single writer path.

aiosqlite serialises statements on its thread, but a multi-statement transaction from one
coroutine could interleave with another's; `transaction()` holds an asyncio lock so every
write is one atomic unit.
"""
from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import aiosqlite

from .migrations import apply_migrations


class Database:
    def __init__(self, conn: aiosqlite.Connection, path: str) -> None:
        self.conn = conn
        self.path = path
        self._lock = asyncio.Lock()
        # repositories that cache rows register here: a rolled-back write must not stay cached
        self.on_rollback: list[Callable[[], None]] = []

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        """BEGIN IMMEDIATE ... COMMIT under the writer lock; rolls back on any exception."""
        async with self._lock:
            await self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                await self.conn.rollback()
                for forget in self.on_rollback:
                    forget()
                raise
            else:
                await self.conn.commit()

    @asynccontextmanager
    async def writing(self) -> AsyncIterator[aiosqlite.Connection]:
        """The writer lock without BEGIN: every statement run under it is its own transaction,
        committed (durable as any COMMIT) when it returns. For a write that is one statement,
        this saves the BEGIN and COMMIT round trips of `transaction()`."""
        async with self._lock:
            assert not self.conn.in_transaction, "writing() inside a transaction"
            yield self.conn

    async def fetchall(self, sql: str, params: Any = ()) -> list[aiosqlite.Row]:
        """One round trip to the database thread (execute + fetch + close in one call)."""
        return list(await self.conn.execute_fetchall(sql, params if isinstance(params, dict) else tuple(params)))

    async def fetchone(self, sql: str, params: Any = ()) -> aiosqlite.Row | None:
        rows = await self.fetchall(sql, params)
        return rows[0] if rows else None

    async def close(self) -> None:
        await self.conn.close()


async def open_database(path: str | Path, *, migrations_dir: Path | None = None) -> Database:
    """Open (creating if needed) the SQLite file, set the pragmas and bring the schema up to date."""
    path = str(path)
    if path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    conn = await aiosqlite.connect(path, isolation_level=None)
    try:
        conn.row_factory = aiosqlite.Row
        await conn.execute("PRAGMA journal_mode=WAL")
        await conn.execute("PRAGMA synchronous=NORMAL")
        await conn.execute("PRAGMA foreign_keys=ON")
        await conn.execute("PRAGMA busy_timeout=5000")
        await conn.execute("PRAGMA temp_store=MEMORY")
        db = Database(conn, path)
        await apply_migrations(db, migrations_dir)
    except BaseException:
        await conn.close()  # its thread would otherwise keep the process alive
        raise
    return db


def backup_file(source: str | Path, dest: str | Path) -> int:
    """A consistent copy of a live database (SQLite's online backup API, safe while the bot
    writes in WAL mode); returns the pages copied. A plain `cp` of a WAL database can miss
    committed answers that are still in the -wal file."""
    import sqlite3

    src_path, dest_path = Path(source), Path(dest)
    if not src_path.exists():
        raise FileNotFoundError(f"{src_path}: no such database")
    if dest_path.exists():
        raise FileExistsError(f"{dest_path} exists: choose a new name")
    src = sqlite3.connect(f"file:{src_path}?mode=ro", uri=True)
    try:
        out = sqlite3.connect(dest_path)
        try:
            src.backup(out)
            return int(out.execute("PRAGMA page_count").fetchone()[0])
        finally:
            out.close()
    finally:
        src.close()
