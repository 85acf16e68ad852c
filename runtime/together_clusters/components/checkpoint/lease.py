"""Which copy of a workload may commit checkpoints: a lease kept beside them, changed by conditional writes only.

A workload dispatched to another cluster (a FleetQueue's MultiKueue moving it out of a region that stopped
answering) may still run where it was: a region cut off from the manager keeps its pods. Both copies would
then save into the same place, and whichever saved last would decide where the run resumes. The lease
makes sure at most one copy's progress counts.

``LEASE.json`` at the root of the checkpoint location records:

- ``holder``: the copy that may commit, named by the uid of the object that runs it on its cluster (its
  JobSet, or its Job). A copy MultiKueue creates on another worker is a new object with a new uid; a pod
  restarted in place (a preemption, a repair) keeps its JobSet's, so it goes on as the same holder.
- ``superseded``: the holders that lost the lease. A copy among them may never claim it back: a region
  that comes back after its workload moved does not resume it.
- ``committed``: the checkpoints that count, in the order they were committed, the newest ``keep``.

A copy **claims** the lease when it first reads or writes checkpoints: a holder it does not know is a newer
copy, which takes over; the former holder joins ``superseded``. A save writes its entry (files, then the
manifest) and then **commits** it by adding it to ``committed``, which only the holder may do. Every change
is a compare-and-swap on the lease (S3: a conditional PUT, ``If-Match`` on the ETag read, ``If-None-Match:
*`` for the first; a directory: an exclusive lock around read, compare and rename), so a commit that
races a claim fails and is retried against the new lease, where the committer finds it lost: its entry is
never committed, and :class:`~.errors.CheckpointSuperseded` stops it. Resuming reads only committed
entries, newest first, so a superseded copy's later saves are never resumed from, whatever their step.

No clock is involved: nothing expires, and a copy cut off from the store only stops when it next saves.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .contract import report
from .errors import CheckpointSuperseded

LEASE_FILE = "LEASE.json"
LEASE_FORMAT = 1
SUPERSEDED_KEPT = 64
"""How many former holders the lease remembers (each a dispatch of the workload: far more than happen)."""
ATTEMPTS = 50
"""Compare-and-swap rounds before giving up: each lost round means another copy changed the lease."""


@runtime_checkable
class LeaseStore(Protocol):
    """A backend that can keep one small file at its root under compare-and-swap."""

    def read_versioned(self, name: str) -> tuple[bytes, str] | None:
        """The file's content and a tag that changes with every write of it, or None if it is absent."""
        ...

    def write_if(self, name: str, data: bytes, expected_tag: str | None) -> bool:
        """Write the file if its tag is still ``expected_tag`` (None: if it is still absent); False if not."""
        ...


class CheckpointListing(Protocol):
    """Where a location's first lease finds the checkpoints saved before it had one (the Checkpointer)."""

    def complete_oldest_first(self) -> list[str]:
        """The entries with a manifest, oldest first."""
        ...


@dataclass(frozen=True)
class LeaseState:
    """What the lease records (see the module docstring)."""

    holder: str
    superseded: tuple[str, ...] = ()
    committed: tuple[str, ...] = ()

    def encoded(self) -> bytes:
        # A fresh nonce makes every write's content, and so its S3 ETag (an MD5 of it), unique: a tag read
        # before two writes that happen to leave the same state must not match after them.
        body = {
            "format": LEASE_FORMAT,
            "holder": self.holder,
            "superseded": list(self.superseded),
            "committed": list(self.committed),
            "nonce": uuid.uuid4().hex,
        }
        return json.dumps(body, sort_keys=True).encode()

    @classmethod
    def decoded(cls, raw: bytes) -> LeaseState:
        try:
            body = json.loads(raw)
            if body.get("format") != LEASE_FORMAT:
                raise ValueError(f"format {body.get('format')!r}, expected {LEASE_FORMAT}")
            return cls(
                holder=str(body["holder"]),
                superseded=tuple(str(h) for h in body.get("superseded") or ()),
                committed=tuple(str(c) for c in body.get("committed") or ()),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            # Not skipped like a corrupt checkpoint: guessing who holds it could let two copies commit.
            raise ValueError(f"{LEASE_FILE} is unreadable ({e}): remove it to let the next copy claim") from e


class Lease:
    """The lease of one checkpoint location, as seen by the copy named ``holder``."""

    def __init__(
        self, store: LeaseStore, holder: str, keep: int, existing: CheckpointListing | None = None
    ) -> None:
        """``existing``: the checkpoints already there, which the first claim of the location commits (saved
        before it had a lease)."""
        if not holder:
            raise ValueError("a lease holder must be named")
        self.store = store
        self.holder = holder
        self.keep = keep
        self._existing = existing
        self.claimed = False

    def current(self) -> LeaseState | None:
        found = self.store.read_versioned(LEASE_FILE)
        return None if found is None else LeaseState.decoded(found[0])

    def claim(self) -> LeaseState:
        """Take the lease (a no-op when this copy holds it); CheckpointSuperseded if this copy lost it."""
        for _ in range(ATTEMPTS):
            found = self.store.read_versioned(LEASE_FILE)
            if found is None:
                before = () if self._existing is None else tuple(self._existing.complete_oldest_first())
                state = LeaseState(self.holder, (), before[-self.keep :])
                if self.store.write_if(LEASE_FILE, state.encoded(), None):
                    return self._claimed(state, None)
                continue
            raw, tag = found
            state = LeaseState.decoded(raw)
            if state.holder == self.holder:
                self.claimed = True
                return state
            self._refuse_if_superseded(state)
            superseded = (*(h for h in state.superseded if h != state.holder), state.holder)
            taken = LeaseState(self.holder, superseded[-SUPERSEDED_KEPT:], state.committed)
            if self.store.write_if(LEASE_FILE, taken.encoded(), tag):
                return self._claimed(taken, state.holder)
        raise RuntimeError(
            f"could not claim {LEASE_FILE} in {ATTEMPTS} rounds: other copies keep changing it"
        )

    def commit(self, entry: str) -> LeaseState:
        """Count ``entry`` (complete: its manifest written) as this copy's newest checkpoint; CheckpointSuperseded,
        and the entry never counts, if another copy holds the lease."""
        if not self.claimed:
            self.claim()
        for _ in range(ATTEMPTS):
            found = self.store.read_versioned(LEASE_FILE)
            if found is None:
                # Removed under us (by hand): claim afresh, with what is complete now.
                self.claim()
                continue
            raw, tag = found
            state = LeaseState.decoded(raw)
            if state.holder != self.holder:
                raise CheckpointSuperseded(
                    f"copy {self.holder} lost the checkpoint lease to {state.holder}, another copy of this "
                    f"workload: checkpoint {entry} does not count, and this copy must stop"
                )
            committed = (*(c for c in state.committed if c != entry), entry)[-self.keep :]
            if self.store.write_if(
                LEASE_FILE, LeaseState(self.holder, state.superseded, committed).encoded(), tag
            ):
                return LeaseState(self.holder, state.superseded, committed)
        raise RuntimeError(
            f"could not commit {entry} in {ATTEMPTS} rounds: other copies keep changing the lease"
        )

    def _refuse_if_superseded(self, state: LeaseState) -> None:
        if self.holder in state.superseded:
            raise CheckpointSuperseded(
                f"copy {self.holder} of this workload was superseded by {state.holder}, which holds the "
                "checkpoint lease: this copy's progress no longer counts, and it must not resume"
            )

    def _claimed(self, state: LeaseState, previous: str | None) -> LeaseState:
        self.claimed = True
        report(
            f"holding the checkpoint lease as {self.holder}"
            + (f" (superseding {previous})" if previous else "")
        )
        return state


def file_tag(data: bytes) -> str:
    """The tag of a lease file kept in a directory: a digest of its content (unique per write, see
    :meth:`LeaseState.encoded`)."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def exclusive_lock(path: str) -> Callable[[], None]:
    """Hold an exclusive ``flock`` on ``path`` (created if absent); the function that releases it."""
    import fcntl  # POSIX only, like the shared volumes it guards; imported where it is needed

    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except BaseException:
        os.close(fd)
        raise

    def release() -> None:
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    return release
