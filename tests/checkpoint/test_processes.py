"""The runtime in real processes: SIGTERM saves and exits 143, SIGKILL mid-write leaves the previous checkpoint."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from together_clusters.components.checkpoint import PREEMPTED_EXIT_CODE, Checkpointer, FilesystemBackend
from together_clusters.components.checkpoint.checkpointer import MANIFEST

from .conftest import Worker
from .worker import state_for


def contract_env(directory: Path, budget: int = 60) -> dict[str, str]:
    return {
        "CHECKPOINT_BACKEND": "filesystem",
        "CHECKPOINT_DIR": str(directory),
        "CHECKPOINT_RESUME": "true",
        "CHECKPOINT_KEEP": "2",
        "CHECKPOINT_SAVE_BUDGET_SECONDS": str(budget),
    }


def step_of(line: str) -> int:
    return int(line.split()[1])


def test_sigterm_saves_within_budget_and_a_new_process_resumes(tmp_path: Path, workers: list[Worker]) -> None:
    env = contract_env(tmp_path / "ft")
    first = Worker(["train", "100000"], env)
    workers.append(first)
    assert first.wait_for(lambda line: line.startswith("START")) == "START 0"
    first.wait_for(lambda line: line.startswith("STEP") and step_of(line) >= 5)
    first.process.send_signal(signal.SIGTERM)
    assert first.finish() == PREEMPTED_EXIT_CODE
    last_step = max(step_of(line) for line in first.seen if line.startswith("STEP"))
    assert "saved checkpoint" in first.stderr() and "budget 60s" in first.stderr()
    assert "overran" not in first.stderr()

    saved = Checkpointer(FilesystemBackend(tmp_path / "ft")).latest()
    assert saved is not None
    assert 5 <= saved.step <= last_step
    assert saved.files == state_for(saved.step)
    assert not [p for p in (tmp_path / "ft").rglob(".*tmp*")], "temporary files left behind"

    second = Worker(["train", str(saved.step + 3)], env)
    workers.append(second)
    assert second.wait_for(lambda line: line.startswith("START")) == f"START {saved.step}"
    assert second.finish() == 0
    assert second.seen[-1] == f"DONE {saved.step + 3}"
    # What a drill reads from the replacement pod's log, whatever the program's logging setup.
    assert (
        f"together_clusters.checkpoint: resumed step={saved.step} checkpoint={saved.name}\n"
        in second.stderr()
    )


def test_sigkill_mid_write_leaves_the_previous_checkpoint_in_use(
    tmp_path: Path, workers: list[Worker]
) -> None:
    directory = tmp_path / "ft"
    env = contract_env(directory)
    writer = Worker(["slow-save"], env)
    workers.append(writer)
    writer.wait_for(lambda line: line == "MIDWRITE")
    os.kill(writer.process.pid, signal.SIGKILL)
    assert writer.finish() == -signal.SIGKILL

    entries = sorted(p for p in directory.iterdir() if p.is_dir())
    assert len(entries) == 2
    torn = entries[1]
    assert not (torn / MANIFEST).exists()
    assert (torn / "state.json").exists()
    assert [p.name for p in torn.iterdir() if p.name.startswith(".weights.bin.tmp-")], (
        "expected a torn temp file"
    )

    checkpointer = Checkpointer(FilesystemBackend(directory), keep=2)
    previous = checkpointer.latest()
    assert previous is not None and previous.step == 1
    assert previous.files == state_for(1)

    resumed = Worker(["train", "3"], env)
    workers.append(resumed)
    assert resumed.wait_for(lambda line: line.startswith("START")) == "START 1"
    assert resumed.finish() == 0

    # The next save drops the abandoned write.
    checkpointer.save(4, state_for(4))
    assert not torn.exists()
    latest = checkpointer.latest()
    assert latest is not None and json.loads(latest.files["state.json"]) == {"step": 4}


def test_sigterm_while_the_main_thread_holds_the_logging_lock_still_saves_and_exits(
    tmp_path: Path, workers: list[Worker]
) -> None:
    directory = tmp_path / "ft"
    worker = Worker(["hold-log-lock"], contract_env(directory, budget=30))
    workers.append(worker)
    worker.wait_for(lambda line: line == "HOLDING THE LOGGING LOCK")
    worker.process.send_signal(signal.SIGTERM)
    assert worker.finish() == PREEMPTED_EXIT_CODE
    assert "overran" not in worker.stderr(), worker.stderr()
    assert "saved checkpoint" in worker.stderr()
    saved = Checkpointer(FilesystemBackend(directory)).latest()
    assert saved is not None and saved.step == 3 and saved.files == state_for(3)


def test_the_sigterm_save_does_not_prune_and_the_next_run_does(tmp_path: Path, workers: list[Worker]) -> None:
    directory = tmp_path / "ft"
    env = contract_env(directory)  # keep 2
    first = Worker(["train", "100000"], env)
    workers.append(first)
    first.wait_for(lambda line: line.startswith("STEP"))
    ckpt = Checkpointer(FilesystemBackend(directory), keep=2)
    for step in (1, 2, 3):  # older than anything the worker saves (it resumes from 0)
        ckpt.write(step, state_for(step))
    first.process.send_signal(signal.SIGTERM)
    assert first.finish() == PREEMPTED_EXIT_CODE
    assert len(FilesystemBackend(directory).entries()) == 4, "the SIGTERM path spent its budget pruning"

    # A prune killed half-way leaves a renamed entry behind; the next run's save clears both.
    (directory / ".deleting-ckpt-000000000001-00000000000000000001-4242").mkdir()
    (directory / ".deleting-ckpt-000000000001-00000000000000000001-4242" / "weights.bin").write_bytes(b"x")
    second = Worker(["train", "100000"], env)
    workers.append(second)
    second.wait_for(lambda line: line.startswith("STEP"))
    second.kill()
    Checkpointer(FilesystemBackend(directory), keep=2).save(10**6, state_for(1))
    assert sorted(p.name for p in directory.iterdir() if p.name.startswith(".deleting-")) == []
    assert len(FilesystemBackend(directory).entries()) == 2


def test_a_checkpoint_larger_than_the_process_memory_cap_saves_and_restores(
    tmp_path: Path, workers: list[Worker]
) -> None:
    worker = Worker(["capped", "64"], {**contract_env(tmp_path / "big"), "MALLOC_ARENA_MAX": "2"})
    workers.append(worker)
    assert worker.finish() == 0, worker.stderr()
    assert "ONE BUFFER OF THAT SIZE DOES NOT FIT" in worker.seen, "the cap did not bite"
    assert worker.seen[-1] == "RESTORED INTACT"


def test_a_sigterm_save_that_overruns_its_budget_still_exits_143(
    tmp_path: Path, workers: list[Worker]
) -> None:
    # 137 (the kubelet's SIGKILL at the end of the grace period) would count against backoffLimit; 143 does not.
    worker = Worker(["overrun"], contract_env(tmp_path / "ft", budget=1))
    workers.append(worker)
    worker.wait_for(lambda line: line == "READY")
    worker.process.send_signal(signal.SIGTERM)
    assert worker.finish() == PREEMPTED_EXIT_CODE
    assert "overran its 1s budget" in worker.stderr()


@pytest.mark.parametrize("how", ["handled", "stopping"])
def test_a_loop_that_returns_at_once_after_sigterm_still_saves_and_exits_143(
    tmp_path: Path, workers: list[Worker], how: str
) -> None:
    """Exit 0 would make the Job count the attempt as Succeeded and end the run without its state."""
    worker = Worker(["return-on-sigterm", how], contract_env(tmp_path / "ft"))
    workers.append(worker)
    worker.wait_for(lambda line: line == "READY")
    worker.process.send_signal(signal.SIGTERM)
    assert worker.finish() == PREEMPTED_EXIT_CODE, worker.stderr()
    assert "RETURNING" in worker.seen  # the loop did return before the save was done
    saved = Checkpointer(FilesystemBackend(tmp_path / "ft")).latest()
    assert saved is not None, worker.stderr()
    assert saved.step == 7 and saved.files == state_for(7)
