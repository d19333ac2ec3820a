"""SQLite storage: one connection, WAL, numbered migrations, small repositories."""
from .db import Database, open_database
from .migrations import MIGRATIONS_DIR, apply_migrations

__all__ = ["Database", "open_database", "apply_migrations", "MIGRATIONS_DIR"]
