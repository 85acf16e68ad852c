"""What every kill campaign over a whole stack shares (issue 41, part 1): a Pulumi project on the real engine
whose ``up``, update or ``destroy`` is SIGKILLed after a number of resource events drawn from a seed, then rerun
as the docs tell a user to; the kill point reached (the event count, the part of the stack, the resources in
flight); and a seed's outcome, for the run's "campaign reports" summary.

The campaigns themselves (what their stacks are made of and what they check on the live clusters) are
``test_kill_campaign.py`` (one cluster with its charts, queue, workloads, gate and volume) and
``test_kill_campaign_fleet.py`` (a ``FleetQueue`` over two worker clusters).
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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
from together_clusters.provider.settings import ADOPT_CONFIG_KEY, ADOPT_MANY_CONFIG_KEY

# What the provider's error of a rerun spells for adopting a cluster a killed create left untracked: the
# templates' one key, and a stack of several clusters' entry per cluster_name (provider/namesakes.py).
SINGLE_ADOPTION = rf"`pulumi config set ({ADOPT_CONFIG_KEY} \S+)`"
SEVERAL_ADOPTION = rf"`pulumi config set (--path {ADOPT_MANY_CONFIG_KEY}\.\S+ \S+)`"

CHARTS = _engine.ROOT / ".kubernetes" / "charts"

# Components: their step starts with their children and ends with the run; a kill is never "in" them.
COMPONENTS = ("pulumi:pulumi:Stack", "together:components:", "kubernetes:helm.sh/", "kubernetes:yaml/")


@contextmanager
def campaign_emulator() -> Iterator[RunningEmulator]:
    """A campaign's emulator, at speed 60, whose twin has no controller of its own (the stacks install JobSet
    and Kueue from their charts); the test is skipped without the engine, the twin or the charts."""
    from .conftest import require_twin  # conftest imports the twin's helpers

    _engine.require_engine()
    require_twin()
    if not all((CHARTS / name / "Chart.yaml").is_file() for name in ("jobset", "kueue")):
        pytest.skip("scripts/install-kubernetes has not copied the controllers' charts")
    with start_emulator(speed=60, kubernetes=TwinOptions(jobset=False)) as running:
        yield running


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


def resource_events(events: list[dict[str, Any]], changes_only: bool = False) -> list[tuple[str, str]]:
    """(``pre``/``done``/``failed``, urn) of each resource step event, in order; with ``changes_only``, of the
    steps that change something (an update's ``same`` steps left out: a kill among them hits nothing)."""
    found = []
    for event in events:
        for kind, said in (
            ("pre", "resourcePreEvent"),
            ("done", "resOutputsEvent"),
            ("failed", "resOpFailedEvent"),
        ):
            if said in event:
                metadata = event[said]["metadata"]
                if not (changes_only and metadata.get("op") in ("same", "read")):
                    found.append((kind, metadata["urn"]))
    return found


def in_flight(events: list[tuple[str, str]]) -> list[str]:
    """The resources (type and name) whose step had started and not ended, components left out."""
    started: dict[str, None] = {}
    for kind, urn in events:
        if kind == "pre":
            started[urn] = None
        else:
            started.pop(urn, None)
    return [short(urn) for urn in started if not short(urn).startswith(COMPONENTS)]


def phase(flying: list[str], phases: tuple[tuple[str, str], ...]) -> str:
    """Which part of the stack a kill hit, from the resources in flight (type::name): the name of the first of
    ``phases`` (a marker, a name) whose marker one of them holds; else the first one's type; or between steps."""
    if not flying:
        return "between steps"
    for marker, name in phases:
        if any(marker in f for f in flying):
            return name
    return flying[0].split("::", 1)[0]


def short(urn: str) -> str:
    """A resource's type (its last part) and name, from its URN."""
    type_, name = urn.split("::")[-2:]
    return f"{type_.rsplit('$', 1)[-1]}::{name}"


@dataclass
class KilledProject:
    """A Pulumi project with its stack ``test`` on the real engine (own state under ``tmp``), pointed at an
    emulator; ``phases`` name the part of the stack a kill hit (see :func:`phase`); ``adoption``
    finds, in a rerun's error, the arguments of the ``pulumi config set`` that adopts a cluster the killed run
    made but did not record (SINGLE_ADOPTION or SEVERAL_ADOPTION, as the program reads it)."""

    tmp: Path
    project: str
    program: str
    env_extra: dict[str, str]
    phases: tuple[tuple[str, str], ...]
    adoption: str
    dir: Path = field(init=False)
    env: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        self.dir = _engine.write_project(self.tmp / "prog", self.project, self.program)
        self.env = _engine.engine_env(self.tmp, extra=self.env_extra)
        self.run("stack", "init", "test", check=True)

    def run(self, *args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
        return _engine.run_pulumi(list(args), cwd=self.dir, env=self.env, check=check)

    def resources(self) -> list[dict[str, Any]]:
        return _engine.stack_resources(self.dir, self.env)

    def killed(
        self,
        command: str,
        events_total: int,
        rng: random.Random,
        changes_only: bool = False,
        label: str = "",
        not_before: Callable[[], bool] | None = None,
    ) -> str:
        """``pulumi COMMAND`` SIGKILLed with its process tree (its plugins run in process groups of their own)
        after a number of resource events drawn from ``rng`` (1..``events_total``; with ``changes_only``,
        events of steps that change something), and not before ``not_before()`` holds if given (a state of the
        live platform the kill must follow, however fast the engine went), then ``pulumi cancel`` (the lock a
        killed run leaves); the kill point reached, for the report (named ``label``, default the command)."""
        target = rng.randint(1, events_total)
        label = label or command
        log = self.tmp / f"{label}-{time.monotonic_ns()}.events"
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
                seen = resource_events(read_events(log), changes_only)
                if len(seen) >= target and (not_before is None or not_before()):
                    break
                time.sleep(0.05)
            ended = running.poll()
            _engine.kill_tree(running.pid)
            running.wait()
        seen = resource_events(read_events(log), changes_only)
        self.run("cancel", "--yes", check=True)
        if ended is not None:
            return f"{label} ended (exit {ended}) before event {target}, after {len(seen)}: completed"
        flying = in_flight(seen)
        shown = ", ".join(flying[:3]) + (f" and {len(flying) - 3} more" if len(flying) > 3 else "")
        return f"{label} killed at event {len(seen)} (drawn {target}) in {phase(flying, self.phases)}: {shown or '-'}"

    def rerun(self, command: str) -> tuple[subprocess.CompletedProcess[str], str]:
        """``pulumi COMMAND`` as a user reruns it after a kill, following the recovery the engine or the provider
        names, if any: pending operations, ``refresh --clear-pending-creates``; a cluster the killed run
        created but did not record, the adoption its error spells (each cluster's, in a stack of several).
        The last run, and what was done."""
        done: list[str] = []
        for _ in range(6):  # a stack of several clusters may adopt one a rerun
            proc = self.run(command, *_engine.UP_FLAGS)
            said = proc.stdout + proc.stderr
            adoptions = list(dict.fromkeys(re.findall(self.adoption, said)))
            if proc.returncode == 0:
                break
            if adoptions:
                for arguments in adoptions:
                    self.run("config", "set", *arguments.split(), check=True)
                    done.append(f"config set {arguments} (the adoption the error names)")
            elif "pending" in said.lower() and "refresh" not in " ".join(done):
                refreshed = self.run("refresh", "--clear-pending-creates", *_engine.UP_FLAGS)
                done.append(f"refresh --clear-pending-creates (exit {refreshed.returncode})")
            else:
                break
        return proc, " then ".join(["rerun", *(f"{d}, rerun" for d in done)])


def recorded_object_violations(
    resources: list[dict[str, Any]], api_of: Callable[[dict[str, Any]], client.ApiClient]
) -> list[str]:
    """Each Kubernetes object the state records exists live, in the cluster ``api_of`` gives for it, once: an
    object named by the engine (a random suffix) has no twin of another suffix left by a killed run."""
    found: list[str] = []
    checked = 0
    discovered: dict[int, dynamic.DynamicClient] = {}  # one discovery per cluster
    for resource in resources:
        outputs = resource.get("outputs") or {}
        if (
            not resource["type"].startswith("kubernetes:")
            or "kind" not in outputs
            or "metadata" not in outputs
        ):
            continue
        metadata = outputs["metadata"]
        api = api_of(resource)
        if id(api) not in discovered:
            discovered[id(api)] = dynamic.DynamicClient(api)
        kube = discovered[id(api)]
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
    return found


def _api_version(type_: str) -> str:
    group_version = type_.split(":")[1]
    return group_version.removeprefix("core/")


class RunningPods:
    """Polls, in a thread and all along, the pods Running (not terminating) in the workloads' namespace of the
    clusters ``clusters()`` gives (asked again until it gives ``expected`` of them): for each workload
    (``workload_of`` a pod's labels; None: not a workload's), the pods that ran as (cluster, pod name), and the
    most Running at once."""

    def __init__(
        self,
        clusters: Callable[[], dict[str, client.ApiClient]],
        workload_of: Callable[[dict[str, str]], str | None],
        expected: int = 1,
        interval: float = 0.3,
    ) -> None:
        self.pods: dict[str, set[tuple[str, str]]] = {}
        self.most_at_once: dict[str, int] = {}
        self._clusters = clusters
        self._workload_of = workload_of
        self._expected = expected
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> RunningPods:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def ran(self, workload: str) -> set[str]:
        """The names of the workload's pods that ran, in any cluster."""
        return {pod for _, pod in self.pods.get(workload, set())}

    def _poll(self) -> None:
        cores: dict[str, client.CoreV1Api] = {}
        while not self._stop.wait(self._interval):
            if len(cores) < self._expected:
                try:
                    cores = {name: client.CoreV1Api(api) for name, api in self._clusters().items()}
                except (urllib3.exceptions.HTTPError, OSError):
                    continue
            now: dict[str, set[tuple[str, str]]] = {}
            for name, core in cores.items():
                try:
                    pods = core.list_namespaced_pod("default").items
                except (ApiException, urllib3.exceptions.HTTPError, OSError):
                    continue
                for pod in pods:
                    workload = self._workload_of(pod.metadata.labels or {})
                    if workload and pod.status.phase == "Running" and not pod.metadata.deletion_timestamp:
                        now.setdefault(workload, set()).add((name, pod.metadata.name))
            for workload, pods in now.items():
                self.pods.setdefault(workload, set()).update(pods)
                self.most_at_once[workload] = max(self.most_at_once.get(workload, 0), len(pods))


def converged(proc: subprocess.CompletedProcess[str], what: str) -> list[str]:
    """The violations of a rerun: it failed, or met a Server-Side Apply conflict on its way."""
    if proc.returncode != 0:
        return [f"{what}'s rerun failed: {why(proc)}"]
    if "conflict" in (proc.stdout + proc.stderr).lower():
        return [f"{what}'s rerun met a conflict: {why(proc)}"]
    return []


def why(proc: subprocess.CompletedProcess[str]) -> str:
    """The error lines of a failed run, a few."""
    said = proc.stdout + proc.stderr
    lines = [
        line.strip() for line in said.splitlines() if "error" in line.lower() or "conflict" in line.lower()
    ]
    return " | ".join(dict.fromkeys(lines[:4])) or said[-400:]


def seed_of(seed: Any, fresh_variable: str) -> tuple[int, str]:
    """A parametrized seed: a fixed one as is; ``"fresh"`` drawn now (or from ``fresh_variable``), with the
    note that replays it."""
    if seed != "fresh":
        return int(seed), ""
    drawn = int(os.environ.get(fresh_variable) or int.from_bytes(os.urandom(4), "big"))
    return drawn, f" (fresh; replay: {fresh_variable}={drawn})"


@dataclass
class Outcome:
    """One seed's run: the kill points reached, the steps taken and what was found wrong."""

    seed: int
    campaign: str = "kill campaign"
    kills: list[str] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)

    def report(self) -> str:
        verdict = "ok" if not self.violations else f"{len(self.violations)} violations"
        lines = [f"{self.campaign} seed {self.seed}: {verdict}"]
        lines += [f"  kill: {k}" for k in self.kills]
        lines += [f"  step: {s}" for s in self.steps]
        lines += [f"  VIOLATION {v}" for v in self.violations]
        return "\n".join(lines)
