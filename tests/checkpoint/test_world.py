"""A distributed run's checkpoints in real processes: committed for every rank or not at all, and every
rank resumes from the same step after one rank dies mid-run."""

from __future__ import annotations

import hashlib
import json
import signal
from pathlib import Path

import pytest

from together_clusters.components.checkpoint import (
    Checkpointer,
    CorruptCheckpoint,
    FilesystemBackend,
    WorldCheckpointer,
)

from .conftest import Worker

WORLD = 3
# Rank 2 dies before saving step 9, so no wait commits it: a short wait there decides nothing.
GIVE_UP_AT_9 = {"GIVE_UP_AT_STEP": "9", "GIVE_UP_SECONDS": "3"}


def rank_env(directory: Path, rank: int, round_id: str, **extra: str) -> dict[str, str]:
    return {
        "WORLD_ROUND": round_id,
        "CHECKPOINT_BACKEND": "filesystem",
        "CHECKPOINT_DIR": str(directory),
        "CHECKPOINT_RESUME": "true",
        "CHECKPOINT_KEEP": "2",
        "RANK": str(rank),
        "WORLD_SIZE": str(WORLD),
        **extra,
    }


def start_world(
    directory: Path, workers: list[Worker], total: int, round_id: str, **extra_by_rank: dict[str, str]
) -> list[Worker]:
    ranks = []
    for rank in range(WORLD):
        worker = Worker(
            ["world", str(total), "3"],
            rank_env(directory, rank, round_id, **extra_by_rank.get(f"r{rank}", {})),
        )
        workers.append(worker)
        ranks.append(worker)
    return ranks


def test_a_rank_dying_mid_run_leaves_its_step_uncommitted_and_all_ranks_resume_together(
    tmp_path: Path, workers: list[Worker]
) -> None:
    directory = tmp_path / "run"
    first = start_world(
        directory,
        workers,
        100,
        "round-1",
        r0=GIVE_UP_AT_9,
        r1=GIVE_UP_AT_9,
        r2={"DIE_AT_STEP": "9"},
    )
    assert first[2].finish() == -signal.SIGKILL
    assert first[0].finish() == 1 and first[1].finish() == 1
    assert "COMMITTED 6" in first[0].seen and "UNCOMMITTED 9" in first[0].seen
    entries = sorted(FilesystemBackend(directory).entries())
    assert entries[-1].startswith("ckpt-000000000009-world3"), "ranks 0 and 1 wrote their shards of step 9"

    second = start_world(directory, workers, 12, "round-2")
    starts = [rank.wait_for(lambda line: line.startswith("START")) for rank in second]
    assert starts == ["START 6"] * WORLD, "ranks resumed from different steps"
    assert [rank.finish() for rank in second] == [0, 0, 0]
    assert "COMMITTED 12" in second[0].seen


def test_a_rank_whose_committed_shard_is_damaged_refuses_instead_of_taking_an_older_step(
    tmp_path: Path,
) -> None:
    worlds = [
        WorldCheckpointer(Checkpointer(FilesystemBackend(tmp_path), keep=5), r, 2, round_id="1")
        for r in range(2)
    ]
    for step in (3, 6):
        for rank, world in enumerate(worlds):
            world.save_shard(step, {"s": f"{rank}@{step}".encode()})
        assert worlds[0].commit(step, timeout_seconds=5)
    (tmp_path / "ckpt-000000000006-world2" / "r00001.s").write_bytes(b"damaged")
    latest = worlds[0].latest()
    assert latest is not None and latest.step == 6 and latest.files["s"] == b"0@6"
    with pytest.raises(CorruptCheckpoint):
        worlds[1].latest()


def test_checkpoints_of_another_world_size_are_not_restored(tmp_path: Path) -> None:
    backend = FilesystemBackend(tmp_path)
    solo = WorldCheckpointer(Checkpointer(backend), 0, 1, round_id="1")
    solo.save_shard(5, {"s": b"solo"})
    assert solo.commit(5, timeout_seconds=5)
    assert WorldCheckpointer(Checkpointer(backend), 0, 2, round_id="1").latest() is None


def rank_of(directory: Path, rank: int, round_id: str, world_size: int = WORLD) -> WorldCheckpointer:
    return WorldCheckpointer(Checkpointer(FilesystemBackend(directory)), rank, world_size, round_id=round_id)


def test_a_step_is_committed_only_from_shards_of_one_round(tmp_path: Path) -> None:
    """A world restarted after a preemption re-saves a step its abandoned round left uncommitted: the
    abandoned round's shards must never complete the new round's commit."""
    step = 6
    for rank in range(1, WORLD):  # round 1: every rank but 0 saved the step, then the world was preempted
        rank_of(tmp_path, rank, "round-1").save_shard(step, {"s": f"round-1 rank {rank}".encode()})
    second = [rank_of(tmp_path, rank, "round-2") for rank in range(WORLD)]
    for rank in (0, 1):  # round 2: rank 0 and a subset saved it so far
        second[rank].save_shard(step, {"s": f"round-2 rank {rank}".encode()})

    assert not second[0].commit(step, timeout_seconds=0), "committed with a shard of the abandoned round"
    assert [world.latest() for world in second] == [None] * WORLD

    second[2].save_shard(step, {"s": b"round-2 rank 2"})
    assert second[0].commit(step, timeout_seconds=0)
    for rank, world in enumerate(second):
        restored = world.latest()
        assert restored is not None and restored.step == step
        with restored:
            assert restored.files["s"] == f"round-2 rank {rank}".encode()


def test_a_straggler_of_an_older_round_overwriting_a_committed_shard_is_refused(tmp_path: Path) -> None:
    world = [rank_of(tmp_path, rank, "round-2", world_size=2) for rank in range(2)]
    for rank in range(2):
        world[rank].save_shard(6, {"s": f"round-2 rank {rank}".encode()})
    assert world[0].commit(6, timeout_seconds=0)
    rank_of(tmp_path, 1, "round-1", world_size=2).save_shard(6, {"s": b"round-1 rank 1"})
    with pytest.raises(CorruptCheckpoint, match="round"):
        world[1].latest()


def test_a_world_checkpoint_committed_before_rounds_were_recorded_still_restores(tmp_path: Path) -> None:
    """The format before rounds: rank manifests and MANIFEST.json without a ``round`` field."""
    entry = tmp_path / "ckpt-000000000009-world2"
    entry.mkdir()
    for rank in range(2):
        data = f"rank {rank}".encode()
        (entry / f"r{rank:05d}.s").write_bytes(data)
        files = {"s": {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}}
        manifest = {"format": 1, "step": 9, "rank": rank, "files": files}
        (entry / f"RANK-{rank:05d}.json").write_text(json.dumps(manifest, sort_keys=True))
    (entry / "MANIFEST.json").write_text(json.dumps({"format": 1, "step": 9, "world_size": 2}))
    for rank in range(2):
        restored = rank_of(tmp_path, rank, "round-7", world_size=2).latest()
        assert restored is not None and restored.step == 9
        with restored:
            assert restored.files["s"] == f"rank {rank}".encode()
