"""SQLite persistence of the platform: one row per cluster plus one JSON document of everything else."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
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
        # Each cluster's JSON as last written, so a save only writes the clusters that changed.
        self._written: dict[str, str] = {}

    def load(self) -> tuple[dict[str, Any] | None, list[str]]:
        """The saved platform document (``None`` for a new file) and every cluster's JSON."""
        row = self._db.execute("SELECT value FROM meta WHERE key = 'platform'").fetchone()
        self._written = dict(self._db.execute("SELECT cluster_id, data FROM clusters").fetchall())
        return (json.loads(row[0]) if row else None), list(self._written.values())

    def save(self, meta: dict[str, Any], clusters: dict[str, str], complete: bool = True) -> None:
        """Write the platform document and clusters (JSON by id) in one transaction.

        ``complete``: ``clusters`` is every cluster; those missing are deleted. Otherwise it holds only the
        clusters that changed. Either way, clusters unchanged since the last save are not written again.
        """
        changed = {cid: data for cid, data in clusters.items() if self._written.get(cid) != data}
        removed = set(self._written) - set(clusters) if complete else set()
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
        if complete:
            self._written = dict(clusters)
        else:
            self._written.update(clusters)

    def close(self) -> None:
        """Close the file; the store is unusable afterwards."""
        self._db.close()

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")
