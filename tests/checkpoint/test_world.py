"""A distributed run's checkpoints in real processes: committed for every rank or not at all, and every
rank resumes from the same step after one rank dies mid-run."""

from __future__ import annotations

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


def rank_env(directory: Path, rank: int, **extra: str) -> dict[str, str]:
    return {
        "CHECKPOINT_BACKEND": "filesystem",
        "CHECKPOINT_DIR": str(directory),
        "CHECKPOINT_RESUME": "true",
        "CHECKPOINT_KEEP": "2",
        "RANK": str(rank),
        "WORLD_SIZE": str(WORLD),
        **extra,
    }


def start_world(
    directory: Path, workers: list[Worker], total: int, **extra_by_rank: dict[str, str]
) -> list[Worker]:
    ranks = []
    for rank in range(WORLD):
        worker = Worker(
            ["world", str(total), "3"], rank_env(directory, rank, **extra_by_rank.get(f"r{rank}", {}))
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
        r0=GIVE_UP_AT_9,
        r1=GIVE_UP_AT_9,
        r2={"DIE_AT_STEP": "9"},
    )
    assert first[2].finish() == -signal.SIGKILL
    assert first[0].finish() == 1 and first[1].finish() == 1
    assert "COMMITTED 6" in first[0].seen and "UNCOMMITTED 9" in first[0].seen
    entries = sorted(FilesystemBackend(directory).entries())
    assert entries[-1].startswith("ckpt-000000000009-world3"), "ranks 0 and 1 wrote their shards of step 9"

    second = start_world(directory, workers, 12)
    starts = [rank.wait_for(lambda line: line.startswith("START")) for rank in second]
    assert starts == ["START 6"] * WORLD, "ranks resumed from different steps"
    assert [rank.finish() for rank in second] == [0, 0, 0]
    assert "COMMITTED 12" in second[0].seen


def test_a_rank_whose_committed_shard_is_damaged_refuses_instead_of_taking_an_older_step(
    tmp_path: Path,
) -> None:
    worlds = [WorldCheckpointer(Checkpointer(FilesystemBackend(tmp_path), keep=5), r, 2) for r in range(2)]
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
    solo = WorldCheckpointer(Checkpointer(backend), 0, 1)
    solo.save_shard(5, {"s": b"solo"})
    assert solo.commit(5, timeout_seconds=5)
    assert WorldCheckpointer(Checkpointer(backend), 0, 2).latest() is None
