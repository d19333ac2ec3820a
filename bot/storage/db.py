"""One aiosqlite connection per process with a single writer path.

aiosqlite serialises statements on its thread, but a multi-statement transaction from one
coroutine could interleave with another's; `transaction()` holds an asyncio lock so every
write is one atomic unit.

One bot process per database file: `open_database` takes an exclusive lock on `FILE.lock`
(`flock`, released by the kernel when the process ends, also after kill -9) and refuses to
start when another process holds it. A file that is not a database, a damaged one, a
read-only one or one written by a newer version is refused at start-up with a message that
names the file, the cause and the fix (`StorageError`); faults that start later are logged
once each (`Database.faults`) while the bot keeps serving what it can.
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any

import aiosqlite

from .faults import FaultLog, StorageError, explain, fault_kind
from .migrations import apply_migrations, newer_schema


class Database:
    def __init__(self, conn: aiosqlite.Connection, path: str) -> None:
        self.conn = conn
        self.path = path
        self._lock = asyncio.Lock()
        # repositories that cache rows register here: a rolled-back write must not stay cached
        self.on_rollback: list[Callable[[], None]] = []
        self.faults = FaultLog(path)
        self.lock_file: IO[str] | None = None  # the one-process lock, held until close

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        """BEGIN IMMEDIATE ... COMMIT under the writer lock; rolls back on any exception."""
        async with self._lock:
            await self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                with contextlib.suppress(sqlite3.Error, ValueError):  # the first error is the one to report
                    await self.conn.rollback()
                for forget in self.on_rollback:
                    forget()
                raise
            else:
                try:
                    await self.conn.commit()
                except BaseException:
                    with contextlib.suppress(sqlite3.Error, ValueError):
                        await self.conn.rollback()
                    for forget in self.on_rollback:
                        forget()
                    raise

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

    async def fetchrow(self, sql: str, params: Any = ()) -> aiosqlite.Row:
        """The one row an aggregate or a RETURNING statement always gives."""
        row = await self.fetchone(sql, params)
        if row is None:
            raise RuntimeError(f"expected a row from: {sql[:80]}")
        return row

    async def close(self) -> None:
        try:
            await self.conn.close()
        finally:
            release_lock(self.lock_file)
            self.lock_file = None


def lock_path(path: str | Path) -> Path:
    return Path(f"{path}.lock")


def acquire_lock(path: str | Path) -> IO[str]:
    """The exclusive one-process lock of a database file, or StorageError naming the holder."""
    import fcntl

    lp = lock_path(path)
    try:
        f = open(lp, "a+", encoding="utf-8")  # noqa: SIM115 - held open for the process's life
    except OSError as exc:
        kind = fault_kind(exc) or ("readonly" if isinstance(exc, PermissionError) else "cantopen")
        raise StorageError(explain(kind, path, f"cannot create the lock file {lp}: {exc.strerror}"), kind) from exc
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.seek(0)
        holder = f.read().strip()
        f.close()
        raise StorageError(
            f"{path} is in use by another bot process ({holder or 'pid unknown'}): one process per database "
            "file. Stop the other one first, or give this one its own database (database.path; console: --db). "
            f"(lock: {lp})", "in_use") from None
    with contextlib.suppress(OSError):
        f.seek(0)
        f.truncate()
        f.write(f"pid {os.getpid()}\n")
        f.flush()
    return f


def release_lock(f: IO[str] | None) -> None:
    if f is not None:
        with contextlib.suppress(OSError):
            f.close()  # closing the descriptor releases the flock


async def open_database(path: str | Path, *, migrations_dir: Path | None = None, lock: bool = True) -> Database:
    """Open (creating if needed) the SQLite file, set the pragmas and bring the schema up to date.

    Refuses, with a StorageError that names the file, the cause and the fix: a second process on
    the same file (`lock`), a file that is not a database or is damaged, a database the bot cannot
    write, and one written by a newer version of the bot."""
    path = str(path)
    held: IO[str] | None = None
    if path != ":memory:":
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            kind = fault_kind(exc) or "cantopen"
            raise StorageError(explain(kind, path, f"cannot create {Path(path).parent}: {exc.strerror}"),
                               kind) from exc
        if lock:
            held = acquire_lock(path)
    try:
        conn = await aiosqlite.connect(path, isolation_level=None)
    except sqlite3.Error as exc:
        release_lock(held)
        kind = fault_kind(exc) or "cantopen"
        raise StorageError(explain(kind, path, str(exc)), kind) from exc
    try:
        conn.row_factory = aiosqlite.Row
        try:
            await conn.execute("PRAGMA busy_timeout=5000")
            await conn.execute("PRAGMA journal_mode=WAL")
            await conn.execute("PRAGMA synchronous=NORMAL")
            await conn.execute("PRAGMA foreign_keys=ON")
            await conn.execute("PRAGMA temp_store=MEMORY")
            db = Database(conn, path)
            db.lock_file = held
            newer = await newer_schema(db, migrations_dir)
            if newer:
                raise StorageError(newer.replace("{path}", path), "newer")
            await apply_migrations(db, migrations_dir)
            if path != ":memory:":
                await _check_file(db, path)
        except sqlite3.Error as exc:
            fkind = fault_kind(exc)
            if fkind is None:
                raise
            raise StorageError(explain(fkind, path, str(exc)), fkind) from exc
    except BaseException:
        await conn.close()  # its thread would otherwise keep the process alive
        release_lock(held)
        raise
    return db


async def _check_file(db: Database, path: str) -> None:
    """Cheap start-up checks: the file is writable, and SQLite finds no damage in its structure
    (`quick_check` reads every page once; a few seconds at a million answers at most)."""
    rows = await db.fetchall("PRAGMA quick_check(5)")
    problems = [str(r[0]) for r in rows if str(r[0]) != "ok"]
    if problems:
        raise StorageError(explain("corrupt", path, "; ".join(problems)), "corrupt")
    # a real write (rolled back): a read-only file, directory or mount refuses it here, not at 09:00.
    # A full disk does not stop the start: what can be served is served, and it is said once.
    async with db._lock:
        try:
            await db.conn.execute("BEGIN IMMEDIATE")
            try:
                await db.conn.execute("CREATE TABLE _write_probe (x)")
            finally:
                with contextlib.suppress(sqlite3.Error):
                    await db.conn.rollback()
        except sqlite3.Error as exc:
            if fault_kind(exc) != "full":
                raise
            db.faults.report(exc, "starting")


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
