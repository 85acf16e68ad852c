"""A seeded kill campaign over a whole stack on the twin, through the real engine (issue 41, part 1).

The stack is what users compose: ``provider_for`` a cluster with ``ClusterControllers`` (JobSet and Kueue from
their charts), a ``WorkloadQueue`` following the cluster, and a ``BatchJob`` submitted to it. For each seed,
``pulumi up`` is SIGKILLed (with every process it started, its plugins included: they run in process groups of
their own) after a number of the engine's resource events drawn from the seed, between 1 and the count of a
clean ``up``; then the user's fix: ``pulumi cancel`` (the lock a killed run leaves) and ``pulumi up`` again
(and, if the engine names pending operations, ``pulumi refresh --clear-pending-creates``, then ``up``). Then
``pulumi destroy`` is killed the same way and rerun.

Checked against the live cluster and the emulator, not the state: the rerun succeeds with no Server-Side Apply
conflict; every Kubernetes object the state records exists live, each of them once (an object named by the
engine, with a random suffix, has no twin left by the killed run); the BatchJob is one JobSet with one Job,
and its workload ran in one pod, never two at once; after the destroy's rerun the state is empty and the
emulator has no live cluster of the stack (nothing left running, nothing paid for twice).

Seeds: two fixed ones and one drawn fresh each run, printed (``KILL_CAMPAIGN_FRESH_SEED=<seed>`` replays it;
``KILL_CAMPAIGN_SEEDS=1,2,3`` runs others instead of the fixed ones), as the fault campaign does. Each run
prints its seed, the kill points reached (the event count, the part of the stack and the resources in
flight) and its outcome. About 2 minutes a seed on 2 cores (the module: 5:23 to 5:41 for the three), so few runs.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import urllib3
from kubernetes import client, dynamic
from kubernetes.client.exceptions import ApiException

from tests import _engine
from together_clusters.emulator.kubernetes.options import TwinOptions
from together_clusters.emulator.server import RunningEmulator, start_emulator

from ._programs import TRAINER
from ._twin import DRIVER, GPU, REGION, kube_clients

pytestmark = [pytest.mark.engine, pytest.mark.twin]
API_KEY = "tgp_v1_twin-kill-campaign-0123456789abcdef"
CHARTS = _engine.ROOT / ".kubernetes" / "charts"
JOB = "train"
POD_SELECTOR = f"jobset.sigs.k8s.io/jobset-name={JOB}"
# Seed 457 kills the up while the Cluster is being created (a cluster the rerun must adopt, as its error
# says) and the destroy among the charts' objects. Seed 227 kills the up among JobSet's chart objects, its
# webhook configurations in flight, and the destroy while the cluster is being deleted: with the charts'
# forced apply reverted (commit 6fdd250's transform), its rerun fails with a Server-Side Apply conflict on
# jobset-mutating-webhook-configuration, and again after `refresh --clear-pending-creates`.
FIXED_SEEDS = (457, 227)

# Resource events (a step's start and its outputs) of a clean run of PROGRAM, measured: the kill is drawn
# between the first and the last of them. A run that ends before its kill point counts as "completed".
UP_EVENTS = 218
DESTROY_EVENTS = 218

PROGRAM = f"""\
import pulumi

from together_clusters.components import (
    BatchJob, BatchJobArgs, ClusterControllersArgs, ComputeClass, NodePlacement, PodSettings, WorkloadQueue,
    WorkloadQueueArgs, provider_for,
)
from together_clusters.components import ContainerSpec
from together_clusters.provider import Cluster, ClusterArgs

config = pulumi.Config()
cluster = Cluster("gpu", ClusterArgs(cluster_name=config.require("clusterName"), region={REGION!r},
                                     gpu_type={GPU!r}, num_gpus=8, nvidia_version_id={DRIVER!r},
                                     ready_timeout_minutes=5, adopt_cluster_id=config.get("adoptClusterId")))
provider = provider_for(cluster, controllers=ClusterControllersArgs(kueue=True, chart_source={str(CHARTS)!r}))
queue = WorkloadQueue("queue", WorkloadQueueArgs.following(cluster), opts=pulumi.ResourceOptions(provider=provider))
BatchJob({JOB!r}, BatchJobArgs(container={TRAINER}, checkpoint=None, job_name={JOB!r},
                              pod=PodSettings(namespace="default"),
                              placement=NodePlacement(ComputeClass.STANDARD), queue=queue),
         opts=pulumi.ResourceOptions(provider=provider))
pulumi.export("kube_config", cluster.kube_config)
"""


def read_events(path: Path) -> list[dict[str, Any]]:
    """The engine events ``pulumi ... --json`` has written to ``path`` so far (one still being written is
    left out)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    decoder = json.JSONDecoder()
    events: list[dict[str, Any]] = []
    at = 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        try:
            event, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            return events
        if isinstance(event, dict):
            events.append(event)


def resource_events(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(``pre``/``done``/``failed``, urn) of each resource step event, in order."""
    found = []
    for event in events:
        for kind, said in (
            ("pre", "resourcePreEvent"),
            ("done", "resOutputsEvent"),
            ("failed", "resOpFailedEvent"),
        ):
            if said in event:
                found.append((kind, event[said]["metadata"]["urn"]))
    return found


# Components: their step starts with their children and ends with the run; a kill is never "in" them.
COMPONENTS = ("pulumi:pulumi:Stack", "together:components:", "kubernetes:helm.sh/", "kubernetes:yaml/")


def in_flight(events: list[tuple[str, str]]) -> list[str]:
    """The resources (type and name) whose step had started and not ended, components left out."""
    started: dict[str, None] = {}
    for kind, urn in events:
        if kind == "pre":
            started[urn] = None
        else:
            started.pop(urn, None)
    return [_short(urn) for urn in started if not _short(urn).startswith(COMPONENTS)]


def phase(flying: list[str]) -> str:
    """Which part of the stack a kill hit, from what was in flight: the cluster, the charts' objects, the
    queue's or the workload's objects, the provider, or between steps."""
    if not flying:
        return "between steps"
    if any(f.endswith("Cluster::gpu") for f in flying):
        return "cluster"
    if any(":k8s-controllers" in f for f in flying):
        return "charts"
    if any("::queue" in f for f in flying):
        return "queue"
    if any(f"::{JOB}" in f for f in flying):
        return "workload"
    return flying[0].split("::", 1)[0]


def _short(urn: str) -> str:
    type_, name = urn.split("::")[-2:]
    return f"{type_.rsplit('$', 1)[-1]}::{name}"


@dataclass
class KillStack:
    """One seed's stack (own project and state, own cluster name) on the module's emulator."""

    tmp: Path
    emulator: RunningEmulator
    name: str
    dir: Path = field(init=False)
    env: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        self.dir = _engine.write_project(self.tmp / "prog", "kill-campaign", PROGRAM)
        self.env = _engine.engine_env(
            self.tmp, extra={"TOGETHER_BASE_URL": self.emulator.base_url, "TOGETHER_API_KEY": API_KEY}
        )
        self.run("stack", "init", "test", check=True)
        self.run("config", "set", "clusterName", self.name, check=True)

    def run(self, *args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
        return _engine.run_pulumi(list(args), cwd=self.dir, env=self.env, check=check)

    def live_clusters(self) -> list[dict[str, Any]]:
        return [
            c
            for c in self.emulator.admin.clusters()
            if c.get("cluster_name") == self.name and c.get("status") != "Deleting"
        ]

    def api(self) -> client.ApiClient | None:
        live = self.live_clusters()
        if not live or not live[0].get("kube_config"):
            return None
        return kube_clients(live[0]["kube_config"])

    def killed(self, command: str, events_total: int, rng: random.Random) -> str:
        """``pulumi COMMAND`` SIGKILLed with its process tree after a number of resource events drawn from
        ``rng`` (1..``events_total``), then ``pulumi cancel``; the kill point reached, for the report."""
        target = rng.randint(1, events_total)
        log = self.tmp / f"{command}-{time.monotonic_ns()}.events"
        with subprocess.Popen(
            [str(_engine.PULUMI), command, *_engine.UP_FLAGS, "--json"],
            cwd=str(self.dir),
            env=self.env,
            stdout=log.open("w"),
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        ) as running:
            deadline = time.monotonic() + 400
            seen: list[tuple[str, str]] = []
            while running.poll() is None and time.monotonic() < deadline:
                seen = resource_events(read_events(log))
                if len(seen) >= target:
                    break
                time.sleep(0.05)
            ended = running.poll()
            _engine.kill_tree(running.pid)
            running.wait()
        seen = resource_events(read_events(log))
        _engine.run_pulumi(["cancel", "--yes"], cwd=self.dir, env=self.env, check=True)
        if ended is not None:
            return f"{command} ended (exit {ended}) before event {target}, after {len(seen)}: completed"
        flying = in_flight(seen)
        shown = ", ".join(flying[:3]) + (f" and {len(flying) - 3} more" if len(flying) > 3 else "")
        return f"{command} killed at event {len(seen)} (drawn {target}) in {phase(flying)}: {shown or '-'}"

    def rerun(self, command: str) -> tuple[subprocess.CompletedProcess[str], str]:
        """``pulumi COMMAND`` as a user reruns it after a kill, following the recovery the engine or the provider
        names, if any: pending operations, ``refresh --clear-pending-creates``; a cluster the killed run
        created but did not record, the adoption its error spells (``pulumi config set adoptClusterId ID``).
        The last run, and what was done."""
        done: list[str] = []
        for _ in range(3):
            proc = self.run(command, *_engine.UP_FLAGS)
            said = proc.stdout + proc.stderr
            adopt = re.search(r"`pulumi config set (adoptClusterId) (\S+)`", said)
            if proc.returncode == 0:
                break
            if adopt:
                self.run("config", "set", adopt[1], adopt[2], check=True)
                done.append(f"config set {adopt[1]} (the adoption the error names)")
            elif "pending" in said.lower() and "refresh" not in " ".join(done):
                refreshed = self.run("refresh", "--clear-pending-creates", *_engine.UP_FLAGS)
                done.append(f"refresh --clear-pending-creates (exit {refreshed.returncode})")
            else:
                break
        return proc, " then ".join(["rerun", *(f"{d}, rerun" for d in done)])


class PodWatch:
    """Polls the BatchJob's pods all along: which reached Running, and the most Running at once."""

    def __init__(self, stack: KillStack) -> None:
        self.stack = stack
        self.running: set[str] = set()
        self.most_at_once = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> PodWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _poll(self) -> None:
        core: client.CoreV1Api | None = None
        while not self._stop.wait(0.3):
            try:
                if core is None:
                    api = self.stack.api()
                    if api is None:
                        continue
                    core = client.CoreV1Api(api)
                pods = core.list_namespaced_pod("default", label_selector=POD_SELECTOR).items
            except (ApiException, urllib3.exceptions.HTTPError, OSError):
                continue
            now = {
                p.metadata.name
                for p in pods
                if p.status.phase == "Running" and not p.metadata.deletion_timestamp
            }
            self.running |= now
            self.most_at_once = max(self.most_at_once, len(now))


def _api_version(type_: str) -> str:
    group_version = type_.split(":")[1]
    return group_version.removeprefix("core/")


def live_violations(stack: KillStack) -> list[str]:
    """What the live cluster holds against the state: each Kubernetes object recorded exists live, once; the
    BatchJob is one JobSet of one Job."""
    live = stack.live_clusters()
    resources = _engine.stack_resources(stack.dir, stack.env)
    tracked = [r["id"] for r in resources if r["type"].endswith(":Cluster")]
    if [c["cluster_id"] for c in live] != tracked or len(tracked) != 1:
        # Paid for twice, or running untracked.
        return [f"live clusters {[c['cluster_id'] for c in live]}, the state tracks {tracked}"]
    api = stack.api()
    if api is None:
        return ["the live cluster has no kubeconfig"]
    found: list[str] = []
    kube = dynamic.DynamicClient(api)
    checked = 0
    for resource in resources:
        outputs = resource.get("outputs") or {}
        if (
            not resource["type"].startswith("kubernetes:")
            or "kind" not in outputs
            or "metadata" not in outputs
        ):
            continue
        metadata = outputs["metadata"]
        api_resource = kube.resources.get(
            api_version=outputs.get("apiVersion") or _api_version(resource["type"]), kind=outputs["kind"]
        )
        namespace = metadata.get("namespace") if api_resource.namespaced else None
        try:
            api_resource.get(name=metadata["name"], namespace=namespace)
        except ApiException as error:
            found.append(
                f"{outputs['kind']} {namespace or ''}/{metadata['name']} recorded but not live ({error.status})"
            )
            continue
        checked += 1
        declared = ((resource.get("inputs") or {}).get("metadata") or {}).get("name")
        if not declared:  # named by the engine: a killed run may have left one of another suffix
            base = metadata["name"].rsplit("-", 1)[0]
            twins = [
                item.metadata.name
                for item in api_resource.get(namespace=namespace).items
                if item.metadata.name.rsplit("-", 1)[0] == base
            ]
            if len(twins) != 1:
                found.append(f"{outputs['kind']} {base}-*: {len(twins)} live ({twins})")
    if checked == 0:
        found.append("no Kubernetes object in the state")
    custom = client.CustomObjectsApi(api)
    job_sets = custom.list_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", "default", "jobsets")[
        "items"
    ]
    if [j["metadata"]["name"] for j in job_sets] != [JOB]:
        found.append(f"JobSets in default: {[j['metadata']['name'] for j in job_sets]}, expected [{JOB!r}]")
    jobs = client.BatchV1Api(api).list_namespaced_job("default", label_selector=POD_SELECTOR).items
    if len(jobs) != 1:
        found.append(f"{len(jobs)} Jobs of the JobSet {JOB}: {[j.metadata.name for j in jobs]}")
    return found


@dataclass
class Outcome:
    seed: int
    kills: list[str] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)

    def report(self) -> str:
        verdict = "ok" if not self.violations else f"{len(self.violations)} violations"
        lines = [f"kill campaign seed {self.seed}: {verdict}"]
        lines += [f"  kill: {k}" for k in self.kills]
        lines += [f"  step: {s}" for s in self.steps]
        lines += [f"  VIOLATION {v}" for v in self.violations]
        return "\n".join(lines)


@pytest.fixture(scope="module")
def emulator() -> Iterator[RunningEmulator]:
    from .conftest import require_twin

    _engine.require_engine()
    require_twin()
    if not all((CHARTS / name / "Chart.yaml").is_file() for name in ("jobset", "kueue")):
        pytest.skip("scripts/install-kubernetes has not copied the controllers' charts")
    with start_emulator(speed=60, kubernetes=TwinOptions(jobset=False)) as running:
        yield running


def _seeds() -> list[Any]:
    fixed = [int(s) for s in os.environ.get("KILL_CAMPAIGN_SEEDS", "").split(",") if s.strip()] or FIXED_SEEDS
    return [*fixed, "fresh"]


def _why(proc: subprocess.CompletedProcess[str]) -> str:
    said = proc.stdout + proc.stderr
    lines = [
        line.strip() for line in said.splitlines() if "error" in line.lower() or "conflict" in line.lower()
    ]
    return " | ".join(dict.fromkeys(lines[:4])) or said[-400:]


@pytest.mark.parametrize("seed", _seeds(), ids=lambda s: f"seed-{s}")
def test_a_stack_killed_anywhere_converges_on_rerun(
    emulator: RunningEmulator, tmp_path: Path, seed: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    if seed == "fresh":
        seed = int(os.environ.get("KILL_CAMPAIGN_FRESH_SEED") or int.from_bytes(os.urandom(4), "big"))
        with capsys.disabled():
            print(f"\nfresh kill campaign seed: {seed} (replay: KILL_CAMPAIGN_FRESH_SEED={seed})")
    rng = random.Random(f"kill-campaign:{seed}")
    outcome = Outcome(seed)
    stack = KillStack(tmp_path, emulator, f"kill-{seed}")
    try:
        with PodWatch(stack) as pods:
            outcome.kills.append(stack.killed("up", UP_EVENTS, rng))
            proc, how = stack.rerun("up")
            outcome.steps.append(f"up {how}: exit {proc.returncode}")
            if proc.returncode != 0:
                outcome.violations.append(f"the up's rerun failed: {_why(proc)}")
            elif "conflict" in (proc.stdout + proc.stderr).lower():
                outcome.violations.append(f"the up's rerun met a conflict: {_why(proc)}")
            else:
                outcome.violations += live_violations(stack)
                # The workload started (Kueue admitted it, the twin runs it), in one pod, never two at once.
                deadline = time.monotonic() + 60
                while not pods.running and time.monotonic() < deadline:
                    time.sleep(0.3)
        if len(pods.running) != 1 or pods.most_at_once != 1:
            outcome.violations.append(
                f"the BatchJob's workload ran in {sorted(pods.running)} (at most {pods.most_at_once} at once), "
                "expected one pod"
            )
        outcome.steps.append(f"workload pods that ran: {len(pods.running)}")

        outcome.kills.append(stack.killed("destroy", DESTROY_EVENTS, rng))
        proc, how = stack.rerun("destroy")
        outcome.steps.append(f"destroy {how}: exit {proc.returncode}")
        if proc.returncode != 0:
            outcome.violations.append(f"the destroy's rerun failed: {_why(proc)}")
        left = _engine.stack_resources(stack.dir, stack.env)
        if left:
            outcome.violations.append(
                f"the state still holds {len(left)} resources: {[r['urn'] for r in left][:5]}"
            )
        if stack.live_clusters():
            outcome.violations.append(f"cluster {stack.name} is still live after the destroy")
    finally:
        with capsys.disabled():
            print(f"\n{outcome.report()}")
        if stack.live_clusters():  # never leave a cluster running on the module's emulator
            stack.run("destroy", *_engine.UP_FLAGS)
    assert not outcome.violations, outcome.report()
