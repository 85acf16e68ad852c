"""The checkpoint lease (issue 31, part 5): when a workload's copy is moved to another cluster while the old one
still runs, at most one copy's progress counts, and the old copy never resumes.

Oracles: moto's S3 server over real HTTP (its conditional PUTs, ``If-Match`` and ``If-None-Match``, refuse a
stale write with 412) and a directory under an exclusive lock; real worker processes configured by the
pods' environment contract for the end-to-end case.
"""

from __future__ import annotations

import signal
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from together_clusters.components.checkpoint import (
    PREEMPTED_EXIT_CODE,
    Checkpointer,
    CheckpointSuperseded,
    FilesystemBackend,
    RuntimeConfig,
    S3Backend,
    WorldCheckpointer,
)
from together_clusters.components.checkpoint.checkpointer import MANIFEST
from together_clusters.components.checkpoint.lease import LEASE_FILE, LeaseState

from .conftest import Worker
from .test_s3 import s3_worker_env
from .worker import state_for

RESUME = RuntimeConfig(resume=True)


@pytest.fixture(params=["s3", "directory"])
def make_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[..., Any]:
    """A fresh backend on a shared location per call (each copy of the workload has its own); ``location``
    picks another one."""
    if request.param == "directory":
        return lambda location="trial-0": FilesystemBackend(tmp_path / location)
    s3_client = request.getfixturevalue("s3_client")
    bucket = f"ckpt-{uuid.uuid4().hex[:12]}"
    s3_client.create_bucket(Bucket=bucket)
    return lambda location="trial-0": S3Backend(bucket, f"runs/{location}", client=s3_client)


def copy(make_backend: Callable[..., Any], holder: str, location: str = "trial-0") -> Checkpointer:
    return Checkpointer(make_backend(location), keep=2, config=RESUME, lease_holder=holder)


def steps(checkpointer: Checkpointer) -> int | None:
    found = checkpointer.restore()
    if found is None:
        return None
    with found:
        assert found.files == state_for(found.step)
        return found.step


def test_a_copy_moved_elsewhere_takes_over_and_the_old_copys_later_saves_never_count(
    make_backend: Callable[..., Any],
) -> None:
    east = copy(make_backend, "jobset-uid-east")
    east.save(10, state_for(10))
    east.save(20, state_for(20))

    west = copy(make_backend, "jobset-uid-west")
    assert steps(west) == 20  # the moved copy resumes from the old one's last commit

    # The old copy, still running in a region cut off from the manager, saves further: refused, and its
    # further progress (step 30) is never resumed from, though its files and manifest were written.
    with pytest.raises(CheckpointSuperseded, match="lost the checkpoint lease to jobset-uid-west"):
        east.save(30, state_for(30))
    assert steps(copy(make_backend, "jobset-uid-west")) == 20

    west.save(25, state_for(25))
    assert steps(copy(make_backend, "jobset-uid-west")) == 25
    # The superseded save is gone once the holder prunes; the holder's newest two stay.
    backend = make_backend()
    left = sorted(backend.entries())
    assert [Checkpointer(backend).load(name).step for name in left] == [20, 25]  # type: ignore[union-attr]


def test_a_region_that_comes_back_does_not_resume_the_workload_that_moved(
    make_backend: Callable[..., Any],
) -> None:
    copy(make_backend, "jobset-uid-east").save(10, state_for(10))
    copy(make_backend, "jobset-uid-west").save(15, state_for(15))
    # The old copy's pod restarted in place (same JobSet uid) once its region answers again.
    back = copy(make_backend, "jobset-uid-east")
    with pytest.raises(CheckpointSuperseded, match="superseded by jobset-uid-west"):
        back.restore()
    with pytest.raises(CheckpointSuperseded):
        back.save(40, state_for(40))
    # A later dispatch (a new copy, a new uid) may run it again, from the holder's progress.
    assert steps(copy(make_backend, "jobset-uid-east-2")) == 15


def test_a_pod_restarted_within_its_copy_keeps_the_lease(make_backend: Callable[..., Any]) -> None:
    copy(make_backend, "jobset-uid-west").save(10, state_for(10))
    # A preemption or a repair restarts the pod under the same JobSet: the same holder, no supersession.
    restarted = copy(make_backend, "jobset-uid-west")
    assert steps(restarted) == 10
    restarted.save(20, state_for(20))
    assert steps(copy(make_backend, "jobset-uid-west")) == 20


def test_checkpoints_saved_before_the_location_had_a_lease_are_resumed_from(
    make_backend: Callable[..., Any],
) -> None:
    legacy = Checkpointer(make_backend(), keep=2)
    legacy.save(7, state_for(7))
    legacy.save(9, state_for(9))
    assert steps(copy(make_backend, "jobset-uid-west")) == 9


class Interleaved:
    """A lease store that runs ``between`` once, right after the next lease read of the copy it serves: the
    moment a commit has read the lease and not yet written it back."""

    def __init__(self, inner: Any, conditional: bool = True) -> None:
        self.inner = inner
        self.conditional = conditional
        self.between: Callable[[], None] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def read_versioned(self, name: str) -> tuple[bytes, str] | None:
        found = self.inner.read_versioned(name)
        if self.between is not None and name == LEASE_FILE:
            between, self.between = self.between, None
            between()
        return found

    def write_if(self, name: str, data: bytes, expected_tag: str | None) -> bool:
        if not self.conditional:  # what a store without compare-and-swap would do
            current = self.inner.read_versioned(name)
            return bool(self.inner.write_if(name, data, None if current is None else current[1]))
        return bool(self.inner.write_if(name, data, expected_tag))


def race_a_commit_against_a_claim(make_backend: Callable[..., Any], location: str, conditional: bool) -> str:
    """East commits step 20 while west claims between east's read of the lease and its write; the holder
    the lease names afterwards."""
    store = Interleaved(make_backend(location), conditional)
    east = Checkpointer(store, keep=2, config=RESUME, lease_holder="jobset-uid-east")
    east.save(10, state_for(10))
    store.between = lambda: copy(make_backend, "jobset-uid-west", location).claim()
    try:
        east.save(20, state_for(20))
    except CheckpointSuperseded:
        pass
    found = make_backend(location).read_versioned(LEASE_FILE)
    assert found is not None
    return LeaseState.decoded(found[0]).holder


def test_a_commit_that_races_a_claim_is_refused_by_the_conditional_write(
    make_backend: Callable[..., Any],
) -> None:
    assert race_a_commit_against_a_claim(make_backend, "raced", conditional=True) == "jobset-uid-west"
    assert steps(copy(make_backend, "jobset-uid-west", "raced")) == 10
    # Without compare-and-swap the same interleaving hands the lease back to the superseded copy, which
    # then commits its step 20: the race this test plays is real.
    assert race_a_commit_against_a_claim(make_backend, "unguarded", conditional=False) == "jobset-uid-east"


def test_an_unreadable_lease_stops_every_copy_rather_than_guessing(make_backend: Callable[..., Any]) -> None:
    backend = make_backend()
    copy(make_backend, "jobset-uid-west").save(10, state_for(10))
    found = backend.read_versioned(LEASE_FILE)
    assert backend.write_if(LEASE_FILE, b"{not json", found[1])
    with pytest.raises(ValueError, match="LEASE.json is unreadable .*remove it"):
        copy(make_backend, "jobset-uid-west").restore()


def world_copy(make_backend: Callable[..., Any], holder: str, round_id: str) -> list[WorldCheckpointer]:
    """Both ranks of one copy of a distributed run (a TrainingRun's JobSet): one lease holder, a process each."""
    return [WorldCheckpointer(copy(make_backend, holder), rank, 2, round_id=round_id) for rank in range(2)]


def save_world(world: list[WorldCheckpointer], step: int) -> None:
    for rank in world:
        rank.save_shard(step, {"s": f"{rank.rank}@{step}".encode()})
    assert world[0].commit(step, timeout_seconds=5)


def world_steps(world: list[WorldCheckpointer]) -> list[int | None]:
    found = []
    for rank in world:
        latest = rank.latest()
        if latest is not None:
            with latest:
                assert latest.files["s"] == f"{rank.rank}@{latest.step}".encode()
        found.append(None if latest is None else latest.step)
    return found


def test_a_distributed_run_moved_elsewhere_counts_only_the_new_copys_commits(
    make_backend: Callable[..., Any],
) -> None:
    east = world_copy(make_backend, "jobset-uid-east", "round-east")
    save_world(east, 10)
    # Both ranks of the old copy wrote their shards of step 20; then the run's new copy claims.
    for rank in east:
        rank.save_shard(20, {"s": f"{rank.rank}@20".encode()})
    west = world_copy(make_backend, "jobset-uid-west", "round-west")
    assert world_steps(west) == [10, 10]  # every rank of the new copy resumes from the old one's last commit

    # The old copy's rank 0 commits step 20: refused, and step 20 never counts though its manifest was written.
    with pytest.raises(CheckpointSuperseded, match="lost the checkpoint lease to jobset-uid-west"):
        east[0].commit(20, timeout_seconds=5)
    assert world_steps(west) == [10, 10]
    # Its other ranks learn it too: waiting for the commit, and at their next shard.
    with pytest.raises(CheckpointSuperseded):
        east[1].wait_for_commit(20, timeout_seconds=1)
    with pytest.raises(CheckpointSuperseded):
        east[1].save_shard(30, {"s": b"1@30"})

    save_world(west, 15)  # a lower step than the old copy's uncounted 20: the lease's order decides
    assert world_steps(world_copy(make_backend, "jobset-uid-west", "round-west-2")) == [15, 15]
    assert world_steps(world_copy(make_backend, "jobset-uid-west-2", "round-3")) == [15, 15]


def test_a_distributed_run_restarted_within_its_copy_keeps_the_lease(
    make_backend: Callable[..., Any],
) -> None:
    save_world(world_copy(make_backend, "jobset-uid-west", "round-1"), 10)
    # A preemption restarts the world under the same JobSet: a new round, the same holder.
    again = world_copy(make_backend, "jobset-uid-west", "round-2")
    assert world_steps(again) == [10, 10]
    save_world(again, 20)
    assert world_steps(again) == [20, 20]


@pytest.fixture
def bucket(s3_client: Any) -> Iterator[str]:
    name = f"ckpt-{uuid.uuid4().hex[:12]}"
    s3_client.create_bucket(Bucket=name)
    yield name


def saved_steps(worker: Worker) -> list[int]:
    return [int(line.split()[1]) for line in worker.seen if line.startswith("SAVED")]


def test_two_running_copies_of_a_workload_count_only_the_newer_ones_progress(
    bucket: str, s3_endpoint: str, workers: list[Worker]
) -> None:
    """Real processes through the environment the components set: east trains and saves, west (the copy
    MultiKueue dispatched elsewhere) starts while east still runs, as in a region cut off from the manager."""

    def start(holder: str) -> Worker:
        env = s3_worker_env(bucket, s3_endpoint, CHECKPOINT_S3_PREFIX="fleet/trial-0")
        worker = Worker(["periodic", "100000", "5"], {**env, "CHECKPOINT_LEASE_HOLDER": holder})
        workers.append(worker)
        return worker

    east = start("jobset-uid-east")
    assert east.wait_for(lambda line: line.startswith("START")) == "START 0"
    east.wait_for(lambda line: line.startswith("SAVED") and int(line.split()[1]) >= 10)

    west = start("jobset-uid-west")
    west_start = int(west.wait_for(lambda line: line.startswith("START")).split()[1])
    # East stops at its next save, which does not count; everything it saved before west claimed does.
    assert east.finish() == 1
    assert "CheckpointSuperseded" in east.stderr() and "lost the checkpoint lease" in east.stderr()
    assert west_start == max(saved_steps(east)), (west_start, saved_steps(east))

    west.wait_for(lambda line: line.startswith("SAVED") and int(line.split()[1]) >= west_start + 10)
    west.process.send_signal(signal.SIGTERM)
    assert west.finish() == PREEMPTED_EXIT_CODE

    # East's pod restarted once its region answers again: it does not resume.
    back = start("jobset-uid-east")
    assert back.finish() == 1
    assert "superseded by jobset-uid-west" in back.stderr()
    assert not [line for line in back.seen if line.startswith("START")]

    # West's replacement resumes from west's own last save (the SIGTERM one), with its exact state.
    again = start("jobset-uid-west")
    resumed = int(again.wait_for(lambda line: line.startswith("START")).split()[1])
    assert resumed >= max(saved_steps(west))
    again.process.send_signal(signal.SIGTERM)
    assert again.finish() == PREEMPTED_EXIT_CODE
    assert f"resumed step={resumed}" in again.stderr()


def test_the_manifest_is_written_before_the_commit(make_backend: Callable[..., Any]) -> None:
    """A commit names only a complete entry: a reader that finds a committed name finds its manifest."""
    commits: list[bool] = []
    store = Interleaved(make_backend())
    original = store.write_if

    def write_if(name: str, data: bytes, expected_tag: str | None) -> bool:
        state = LeaseState.decoded(data)
        if state.committed:
            newest = state.committed[-1]
            try:
                store.inner.open(newest, MANIFEST).close()
                commits.append(True)
            except FileNotFoundError:
                commits.append(False)
        return original(name, data, expected_tag)

    store.write_if = write_if  # type: ignore[method-assign]
    checkpointer = Checkpointer(store, keep=2, lease_holder="jobset-uid-west")
    for step in (1, 2, 3):
        checkpointer.save(step, state_for(step))
    assert commits == [True, True, True]
