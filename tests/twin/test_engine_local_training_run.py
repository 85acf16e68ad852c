"""A TrainingRun deployed with a real ``pulumi up`` whose workers run as local processes on the twin survives
the preemption of one worker, then of two back to back, and every rank resumes from the same committed step.

The workers run ``tests/twin/workloads/elastic_worker.py`` under the launch wrapper: a stand-in for torchrun
elastic (see its docstring for what is real and what stands in). The coordinator stays simulated: the
stand-in's rendezvous lives on the shared checkpoint volume, not in a store the coordinator hosts.

Oracles: the checkpoint folder (which steps carry the world's commit, ``MANIFEST.json``), each worker's log
read through the Kubernetes API (its round and the runtime's ``resumed step=`` line), the drill's report.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from together_clusters.cli.drill.report import Outcome, parse_resumed
from together_clusters.cli.drill.runner import DrillArgs, run_drill
from together_clusters.components.demo import DEFAULT_GPU_TYPE, DEFAULT_REGION
from together_clusters.emulator.admin_client import AdminClient
from together_clusters.emulator.kubernetes.options import TerminationMode, TwinOptions

from ._programs import local_process, training_run
from ._twin import (
    checkpoint_folder,
    failed_workloads,
    node_classes,
    pod_log,
    running_pods,
    twin_stack,
    up,
    wait_for,
)

pytestmark = [pytest.mark.engine, pytest.mark.twin]
API_KEY = "tgp_v1_twin-local-training-0123456789abcdef"
WORKER = Path(__file__).resolve().parent / "workloads" / "elastic_worker.py"
ROUND = re.compile(r"^round=(\d+) rank=(\d+) start=(\d+)$", re.M)

PROGRAM = training_run(
    local_process(WORKER), "processes_per_worker=1", "checkpointing=Checkpointing(keep_checkpoints=1000)"
)


def workers(core: client.CoreV1Api) -> list[Any]:
    return running_pods(core, "app.kubernetes.io/component=worker")


def log_of(core: client.CoreV1Api, pod: Any) -> str:
    return pod_log(core, pod.metadata.name, container="main")


def world_resumed(core: client.CoreV1Api, after_round: int) -> tuple[int, int, dict[str, int | None]] | None:
    """Once both running workers train in the same round newer than ``after_round``: that round, the step
    they started from, and each one's last ``resumed step=`` line (the runtime's own report)."""
    pods = workers(core)
    if len(pods) != 2:
        return None
    rounds, resumed = set(), {}
    for pod in pods:
        log = log_of(core, pod)
        found = ROUND.findall(log)
        if not found:
            return None
        number, _rank, start = found[-1]
        rounds.add((int(number), int(start)))
        last = parse_resumed(log)
        resumed[pod.metadata.name] = None if last is None else last.step
    if len(rounds) != 1:
        return None
    ((number, start),) = rounds
    return (number, start, resumed) if number > after_round else None


def committed(folder: Path) -> set[int]:
    """The steps committed for the whole world (rank 0's MANIFEST.json written once every shard was)."""
    return {int(m.parent.name.split("-")[1]) for m in folder.glob("ckpt-*-world2/MANIFEST.json")}


def drill_a_worker(api: client.ApiClient, admin: AdminClient, url: str, mode: TerminationMode) -> Any:
    """Drill the node of a running worker (the drill preempts exactly that node) and return its row."""
    core = client.CoreV1Api(api)
    running = wait_for(lambda: workers(core) or None, "a worker to run")
    before = {p.metadata.uid for p in running}
    admin.set_capacity(DEFAULT_REGION, DEFAULT_GPU_TYPE, 64)  # the refill needs free GPUs
    args = DrillArgs(
        node=running[0].spec.node_name,
        twin_url=url,
        termination=mode,
        timeout_seconds=240,
        log_wait_seconds=60,
    )
    report = run_drill(api, args, progress=lambda _line: None)
    # A JobSet per worker: the preempted worker's own is the row (the other worker had no pod there).
    (row,) = [w for w in report.workloads if w.name.startswith("pretrain-workers")]
    print(f"drill of {report.node} ({mode.value}): {row}")
    # Survived means a replacement runs, not the other worker that was there all along.
    assert any(p.metadata.uid not in before for p in workers(core)), row
    return row


def test_a_training_run_resumes_every_rank_from_the_same_committed_step_after_preemptions(
    tmp_path: Path,
) -> None:
    options = TwinOptions(job_pod_failure_backoff="1s")
    with twin_stack(tmp_path, "twin-local-training", PROGRAM, API_KEY, options=options, speed=60) as stack:
        emulator = stack.emulator
        api = up(stack)
        core = client.CoreV1Api(api)
        admin = AdminClient(emulator.base_url)
        try:
            first = wait_for(lambda: world_resumed(core, 0), "both ranks to train in a first round")
            classes = node_classes(core)
            coordinator = {
                p.metadata.uid for p in running_pods(core) if classes.get(p.spec.node_name) == "standard"
            }
            assert coordinator
            folder = checkpoint_folder(emulator, core, workers(core)[0])
            wait_for(lambda: committed(folder), "a first committed step")

            # One worker preempted: the replacement and the survivor regroup and resume together.
            before = max(committed(folder))
            row = drill_a_worker(api, admin, emulator.base_url, TerminationMode.EVICTION)
            assert row.outcome is Outcome.SURVIVED, row
            number, start, resumed = wait_for(lambda: world_resumed(core, first[0]), "the world to regroup")
            assert start >= before and start in committed(folder), (start, before, sorted(committed(folder)))
            assert set(resumed.values()) == {start}, resumed  # every rank, the survivor too
            assert row.resumed is not None and row.resumed.step == start, row
            print(
                f"after one preemption: round {number}, every rank resumed from {start} (committed before: {before})"
            )

            # Two more back to back: the second comes as soon as the first's replacement runs.
            before = max(committed(folder))
            for mode in (TerminationMode.SIGNAL, TerminationMode.DELETE):
                row = drill_a_worker(api, admin, emulator.base_url, mode)
                assert row.outcome is Outcome.SURVIVED, row
            number, start, resumed = wait_for(
                lambda: world_resumed(core, number), "the world to regroup again"
            )
            print(
                f"after two more: round {number}, every rank resumed from {start} (committed before: {before})"
            )
            assert start >= before and start in committed(folder), (start, before, sorted(committed(folder)))
            assert set(resumed.values()) == {start}, resumed

            classes = node_classes(core)
            assert {classes.get(p.spec.node_name) for p in workers(core)} == {"preemptible"}
            assert failed_workloads(api) == []
            assert coordinator <= {p.metadata.uid for p in running_pods(core)}  # never disrupted
        finally:
            admin.close()
            api.close()
