"""SQLite persistence of the platform: one row per cluster plus one JSON document of everything else."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS clusters (cluster_id TEXT PRIMARY KEY, data TEXT NOT NULL);
"""


class Store:
    """A state file. The platform calls it only under its own lock, so one connection is enough."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)

    def load(self) -> tuple[dict[str, Any] | None, list[str]]:
        """The saved platform document (``None`` for a new file) and every cluster's JSON."""
        row = self._db.execute("SELECT value FROM meta WHERE key = 'platform'").fetchone()
        clusters = [data for (data,) in self._db.execute("SELECT data FROM clusters")]
        return (json.loads(row[0]) if row else None), clusters

    def save(self, meta: dict[str, Any], changed: dict[str, str], removed: set[str]) -> None:
        """Write the platform document and the changed clusters in one transaction."""
        with self._transaction():
            self._db.execute(
                "INSERT INTO meta (key, value) VALUES ('platform', ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (json.dumps(meta),),
            )
            self._db.executemany(
                "INSERT INTO clusters (cluster_id, data) VALUES (?, ?) "
                "ON CONFLICT(cluster_id) DO UPDATE SET data = excluded.data",
                list(changed.items()),
            )
            self._db.executemany("DELETE FROM clusters WHERE cluster_id = ?", [(cid,) for cid in removed])

    def close(self) -> None:
        self._db.close()

    def _transaction(self) -> _Transaction:
        return _Transaction(self._db)


class _Transaction:
    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self._db.execute("COMMIT" if exc_type is None else "ROLLBACK")
