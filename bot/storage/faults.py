"""Storage faults in plain words: which file, what is wrong, what to do.

A fault of the storage itself (disk full, a read-only file or directory, a damaged file, a file
that is not a database, another process holding the lock) hits every write, so the bot keeps
what it has in memory or in the queue and tries again later; anything else is a fault of one
statement or one answer. `explain` turns a fault into one message naming the file, the cause
and the fix; `FaultLog` logs it once per fault (not once per failed write) and says when the
storage works again.
"""
from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

log = logging.getLogger("bot.storage")

# primary SQLite result codes that mean "the storage", not "this statement"
_STORAGE_CODES = {
    "SQLITE_FULL": "full",
    "SQLITE_READONLY": "readonly",
    "SQLITE_PERM": "readonly",
    "SQLITE_CANTOPEN": "cantopen",
    "SQLITE_IOERR": "ioerr",
    "SQLITE_CORRUPT": "corrupt",
    "SQLITE_NOTADB": "notadb",
    "SQLITE_BUSY": "busy",
    "SQLITE_LOCKED": "busy",
    "SQLITE_NOMEM": "nomem",
}


class StorageError(RuntimeError):
    """A storage fault explained (`kind`: full, readonly, corrupt, notadb, newer, in_use, ...).
    Start-up raises it when nothing can be served; the message is for people."""

    def __init__(self, message: str, kind: str = "other") -> None:
        super().__init__(message)
        self.kind = kind


def fault_kind(exc: BaseException) -> str | None:
    """The kind of storage fault `exc` is, or None when it is not one (a fault of one statement
    or one answer: a constraint, a bug, bad data)."""
    if isinstance(exc, StorageError):
        return exc.kind
    if isinstance(exc, sqlite3.Error):
        name = getattr(exc, "sqlite_errorname", "") or ""
        for code, kind in _STORAGE_CODES.items():
            if name == code or name.startswith(code + "_"):
                return kind
        text = str(exc).lower()  # older sqlite3 modules without error names
        for needle, kind in (("disk is full", "full"), ("readonly", "readonly"), ("malformed", "corrupt"),
                             ("not a database", "notadb"), ("disk i/o", "ioerr"), ("unable to open", "cantopen"),
                             ("database is locked", "busy")):
            if needle in text:
                return kind
    if isinstance(exc, OSError) and exc.errno in (28, 30, 5):  # ENOSPC, EROFS, EIO
        return {28: "full", 30: "readonly", 5: "ioerr"}[exc.errno]
    return None


def explain(kind: str, path: str | Path, detail: str = "") -> str:
    """One message for people: the file, the cause, the fix."""
    p = Path(path)
    where = p.parent if str(p.parent) else Path(".")
    backup = "`python -m bot backup --config FILE DEST`"
    text = {
        "full": (f"{p}: the disk is full (SQLite could not grow the file or its -wal journal). "
                 f"Free space on the file system of {where}; nothing is lost: answers wait in the queue "
                 "and are stored as soon as there is room."),
        "readonly": (f"{p}: the database is read-only (the file, its directory {where} or the file system does "
                     "not allow writing; SQLite also writes -wal and -shm files next to it). Make them writable "
                     "for the bot's user (or remount read-write); answers are not stored until then."),
        "cantopen": (f"{p}: the database file cannot be opened: its directory {where} is missing or not "
                     "writable. Create it or point database.path (console: --db) elsewhere."),
        "ioerr": (f"{p}: a disk I/O error while reading or writing the database. Check the disk and free "
                  f"space; if it persists, restore the last backup (made with {backup})."),
        "corrupt": (f"{p}: the database file is damaged (\"malformed\"). Stop the bot, keep the damaged file "
                    f"aside and restore the last backup (made with {backup}), or try "
                    f"`sqlite3 {p} .recover | sqlite3 recovered.sqlite3`."),
        "notadb": (f"{p} is not an SQLite database (wrong path, or the file was overwritten). Check "
                   "database.path (console: --db), or restore the file from a backup (made with "
                   f"{backup}); the bot will not write over it."),
        "busy": (f"{p}: the database is locked by another program for too long (a second bot, or a tool "
                 "holding a write transaction). Close the other program; writes are retried."),
        "nomem": f"{p}: SQLite ran out of memory. Free memory on this machine; writes are retried.",
    }.get(kind, f"{p}: storage error.")
    return f"{text} ({detail})" if detail else text


class FaultLog:
    """Log each storage fault once, with its cause and fix, and once when it is over."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self.current: str | None = None
        self.failures = 0

    def report(self, exc: BaseException, doing: str = "") -> str | None:
        """If `exc` is a storage fault: log it (once while it lasts) and return the message for
        people; else None (the caller handles it as a fault of its own)."""
        kind = fault_kind(exc)
        if kind is None:
            return None
        msg = explain(kind, self.path, f"{type(exc).__name__}: {exc}")
        self.failures += 1
        if kind != self.current:
            self.current = kind
            log.error("storage fault%s: %s", f" while {doing}" if doing else "", msg)
        return msg

    def ok(self) -> None:
        """A write went through: the fault, if any, is over."""
        if self.current is not None:
            log.warning("storage works again (%s: %d failed writes while it lasted)", self.current, self.failures)
            self.current = None
            self.failures = 0
