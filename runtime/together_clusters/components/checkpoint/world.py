"""Checkpoints of a distributed run: a step is committed for the whole world or not at all.

Every rank writes its shard of step S into the same entry (``ckpt-<S>-world<N>``): its files under a
``r<rank>.`` prefix, then its own manifest ``RANK-<rank>.json``. Rank 0 commits the step by writing
``MANIFEST.json`` once every rank's manifest is there. A step some rank never finished (preempted
mid-save, say) has no ``MANIFEST.json`` and is ignored, so every rank restores the same, newest
committed step. A rank whose shard of that step does not verify raises instead of quietly taking an
older step, which would split the world across steps.

A step is committed only from shards of one round: a round is one life of the world (torchrun's
rendezvous round, a JobSet restart), named by ``round_id``, which every rank of the round must agree on
(for example a UUID rank 0 broadcasts once the process group is up). Each rank manifest records its
round, and rank 0 counts only the manifests of its own round. A world restarted after a preemption saves
into the entry of a step its abandoned round left uncommitted; the abandoned round's shards there are
stale, are never combined with the new round's, and are overwritten as the new round's ranks save. The
commit records the round too, and a rank whose shard of a committed step belongs to another round (a
straggler of an older round overwrote it) raises. torchrun's own ``TORCHELASTIC_RESTART_COUNT`` is no
round id: agents do not synchronise it (a replacement starts at 0 while survivors count their restarts),
and a re-rendezvous does not change it. Entries committed before rounds were recorded (no ``round`` in
their manifests) still restore.

Under a checkpoint lease (a TrainingRun in a FleetQueue, :mod:`.lease`), one copy of the run is one holder
(its JobSet's uid, shared by every rank): every rank checks the lease before each shard, rank 0's commit
counts only once the lease records it, and resuming and waiting for a commit read the lease's record. A copy
the run was moved away from stops with CheckpointSuperseded on every rank, and its steps never count.

Only checkpoints of the same world size are restored: resharding is the training code's business.
A preempted rank cannot commit alone, so the world resumes from its last periodic commit: save every
few minutes, not on SIGTERM.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping
from typing import IO

from .checkpointer import (
    ENTRY_PREFIX,
    FORMAT_VERSION,
    MANIFEST,
    Checkpoint,
    Checkpointer,
    FileData,
    VerifiedFiles,
    as_chunks,
)
from .contract import ENV_RANK, ENV_WORLD_SIZE, report_resumed
from .storage import read_all
from .verifying import CorruptCheckpoint

log = logging.getLogger(__name__)


def world_entry_name(step: int, world_size: int) -> str:
    """The entry every rank writes its shard of ``step`` into."""
    if step < 0:
        raise ValueError(f"checkpoint step must be >= 0, got {step}")
    return f"{ENTRY_PREFIX}{step:012d}-world{world_size}"


def rank_manifest(rank: int) -> str:
    return f"RANK-{rank:05d}.json"


def _shard_prefix(rank: int) -> str:
    return f"r{rank:05d}."


class WorldCheckpointer:
    """One rank's view of a distributed run's checkpoints (see the module docstring)."""

    def __init__(self, checkpointer: Checkpointer, rank: int, world_size: int, round_id: str) -> None:
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is outside a world of {world_size}")
        if not round_id:
            raise ValueError(
                "round_id is empty: pass an id every rank of this round of the world agrees on "
                "(e.g. a UUID rank 0 broadcasts after init_process_group)"
            )
        self.checkpointer = checkpointer
        self.backend = checkpointer.backend
        self.rank = rank
        self.world_size = world_size
        self.round_id = round_id

    @classmethod
    def from_env(cls, round_id: str, environ: Mapping[str, str] | None = None) -> WorldCheckpointer:
        """Storage from the checkpoint contract; RANK and WORLD_SIZE as torchrun sets them."""
        env = os.environ if environ is None else environ
        return cls(Checkpointer.from_env(env), int(env[ENV_RANK]), int(env[ENV_WORLD_SIZE]), round_id)

    def save_shard(self, step: int, files: Mapping[str, FileData]) -> str:
        """Write this rank's files of ``step``, then its manifest. Not a checkpoint until committed.

        Under a lease, every rank checks it before each shard (one small read): a copy of the run that
        another copy superseded stops here with CheckpointSuperseded, on every rank, not only rank 0."""
        if self.checkpointer.lease is not None:
            self.checkpointer.lease.claim()
        entry = world_entry_name(step, self.world_size)
        recorded = {}
        for name, data in files.items():
            written = self.backend.write(entry, _shard_prefix(self.rank) + name, as_chunks(data))
            recorded[name] = written.manifest_entry()
        manifest = {
            "format": FORMAT_VERSION,
            "step": step,
            "rank": self.rank,
            "round": self.round_id,
            "files": recorded,
        }
        self.backend.write(entry, rank_manifest(self.rank), [json.dumps(manifest, sort_keys=True).encode()])
        return entry

    def commit(self, step: int, timeout_seconds: float, poll_seconds: float = 0.2) -> bool:
        """Rank 0: once every rank's shard of ``step`` is written in this round, commit it and prune; False
        on timeout (shards of another round do not count)."""
        if self.rank != 0:
            raise ValueError("only rank 0 commits")
        entry = world_entry_name(step, self.world_size)
        deadline = time.monotonic() + timeout_seconds
        while (missing := self._missing_ranks(entry)) and time.monotonic() < deadline:
            time.sleep(poll_seconds)
        if missing:
            log.warning(
                "step %d not committed: no shard of round %s from ranks %s", step, self.round_id, missing[:10]
            )
            return False
        manifest = {
            "format": FORMAT_VERSION,
            "step": step,
            "world_size": self.world_size,
            "round": self.round_id,
        }
        self.backend.write(entry, MANIFEST, [json.dumps(manifest, sort_keys=True).encode()])
        if self.checkpointer.lease is not None:
            # The step counts only once the lease records it (CheckpointSuperseded if another copy holds it).
            self.checkpointer.lease.commit(entry)
        log.info("committed step %d for a world of %d", step, self.world_size)
        self.checkpointer.prune(just_saved=entry)
        return True

    def wait_for_commit(self, step: int, timeout_seconds: float, poll_seconds: float = 0.2) -> bool:
        """Other ranks: wait until rank 0 has committed ``step`` (where a collective barrier is not at hand)."""
        entry = world_entry_name(step, self.world_size)
        deadline = time.monotonic() + timeout_seconds
        while True:
            if self._committed(entry):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(poll_seconds)

    def _committed(self, entry: str) -> bool:
        """Whether rank 0 committed ``entry``: its MANIFEST.json, and under a lease the lease's record of it."""
        lease = self.checkpointer.lease
        if lease is not None:
            return entry in lease.claim().committed
        return self.checkpointer.has_manifest(entry)

    def _missing_ranks(self, entry: str) -> list[int]:
        """The ranks with no manifest of this round in ``entry`` (none, or a stale one of another round)."""
        missing = []
        for rank in range(self.world_size):
            try:
                manifest = json.loads(read_all(self.backend, entry, rank_manifest(rank)))
            except (FileNotFoundError, ValueError):
                missing.append(rank)
                continue
            if not isinstance(manifest, dict) or manifest.get("round") != self.round_id:
                missing.append(rank)
        return missing

    def latest(self) -> Checkpoint | None:
        """This rank's shard of the newest committed step of this world size, or None."""
        # The Checkpointer's candidates (under a lease, only what it records as committed), of this world size.
        suffix = f"-world{self.world_size}"
        for entry in (e for e in self.checkpointer.candidates_newest_first() if e.endswith(suffix)):
            try:
                committed = json.loads(read_all(self.backend, entry, MANIFEST))
            except FileNotFoundError:
                continue  # not committed: some rank never finished this step
            except ValueError as e:
                raise CorruptCheckpoint(f"{entry}: {MANIFEST} is unreadable: {e!r}") from e
            return self._load_shard(entry, committed.get("round") if isinstance(committed, dict) else None)
        return None

    def restore(self) -> Checkpoint | None:
        """:meth:`latest` when the environment asks to resume (CHECKPOINT_RESUME)."""
        checkpoint = self.latest() if self.checkpointer.config.resume else None
        if checkpoint is not None:
            report_resumed(checkpoint.step, checkpoint.name)
        return checkpoint

    def _load_shard(self, entry: str, committed_round: str | None) -> Checkpoint:
        try:
            manifest = json.loads(read_all(self.backend, entry, rank_manifest(self.rank)))
            step = int(manifest["step"])
            expected = manifest["files"]
            shard_round = manifest.get("round")
        except (FileNotFoundError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise CorruptCheckpoint(
                f"{entry}: rank {self.rank}'s manifest is missing or unreadable: {e!r}"
            ) from e
        if committed_round is not None and shard_round != committed_round:
            raise CorruptCheckpoint(
                f"{entry}: rank {self.rank}'s shard is of round {shard_round!r}, the step was committed in "
                f"round {committed_round!r} (a rank of another round overwrote it)"
            )
        streams: dict[str, IO[bytes]] = {}
        try:
            for name, expectation in expected.items():
                streams[name] = self.checkpointer.open_verified(
                    entry, _shard_prefix(self.rank) + name, expectation
                )
        except BaseException:
            VerifiedFiles(streams).close()
            raise
        return Checkpoint(name=entry, step=step, files=VerifiedFiles(streams))
