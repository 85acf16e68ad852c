"""Helpers of the twin tests: a cluster on the emulator seen through the compute API and through Kubernetes."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import httpx
import pytest
import urllib3
import yaml
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from tests import _engine
from together_clusters.cli.drill.modes import EVICT_WITHOUT_REPLACEMENT, REMEDIATION_MODES
from together_clusters.cli.drill.report import DrillReport
from together_clusters.cli.drill.runner import DrillArgs, RemediationTarget, run_drill, run_remediation_drill
from together_clusters.cli.drill.safety import instance_of
from together_clusters.components.demo import DEFAULT_GPU_TYPE, DEFAULT_REGION
from together_clusters.emulator.admin_client import AdminClient
from together_clusters.emulator.kubernetes.local_pods import rewrite
from together_clusters.emulator.kubernetes.local_runtime import root_for
from together_clusters.emulator.kubernetes.options import TerminationMode, TwinOptions
from together_clusters.emulator.kubernetes.shared_volumes import VOLUME_ID_LABEL
from together_clusters.emulator.server import RunningEmulator, start_emulator
from together_clusters.provider.client import TogetherClient
from together_clusters.provider.kubeconfig import kubeconfig_text

from ._repairs import remediation_timings

COMPUTE_CLASS = "together.ai/compute-class"
REGION = "us-central-8"
GPU = "H100_SXM"
# The API refuses a create without a driver selector; any driver the region offers will do.
DRIVER = "nv-570-cu128-ubuntu2204"
T = TypeVar("T")


def wait_for(check: Callable[[], T | None], what: str, timeout: float = 120.0) -> T:
    """Poll ``check`` until it returns something truthy; fail naming ``what`` (and the last value) after
    ``timeout`` seconds. The timeout only bounds a hang, it asserts nothing about speed."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}; last seen: {last!r}")


def no_namespace_terminating(cluster: TwinCluster, timeout: float = 300.0) -> None:
    """Wait until every namespace an earlier test deleted is gone, with its pods.

    The twin's cluster is shared by the modules a worker runs: a test that drains a node owns that node only
    once no earlier test's pods (their namespace still being deleted) are left on it, or its drain waits on
    theirs. Which modules ran first must not decide whether it passes."""

    def terminating() -> list[str]:
        return [
            ns.metadata.name
            for ns in cluster.core.list_namespace().items
            if ns.status is not None and ns.status.phase == "Terminating"
        ]

    wait_for(lambda: not terminating() or None, "earlier tests' namespaces to be deleted", timeout=timeout)


def alive(pids: list[int]) -> list[int]:
    """The processes among ``pids`` that still run (zombies count as ended)."""
    running = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                state = stat.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            running.append(pid)
    return running


def kube_clients(kubeconfig: str) -> client.ApiClient:
    """A Kubernetes API client from a kubeconfig: as the API returns it (base64) or as a stack outputs it."""
    return config.new_client_from_config_dict(yaml.safe_load(kubeconfig_text(kubeconfig) or ""))


def create_body(name: str, **fields: Any) -> dict[str, Any]:
    """The body of a create of the cluster ``name`` the twin can run; ``fields`` add to or override it."""
    return {
        "cluster_name": name,
        "region": REGION,
        "gpu_type": GPU,
        "billing_type": "ON_DEMAND",
        "nvidia_version_id": DRIVER,
        **fields,
    }


@dataclass
class TwinCluster:
    """An emulated cluster with its twin: the compute API (``http``) and Kubernetes (``core``, ``batch``)."""

    emulator: RunningEmulator
    cluster_id: str
    kubeconfig: str
    http: httpx.Client
    api: client.ApiClient
    core: client.CoreV1Api = field(init=False)
    batch: client.BatchV1Api = field(init=False)

    def __post_init__(self) -> None:
        self.core = client.CoreV1Api(self.api)
        self.batch = client.BatchV1Api(self.api)

    @classmethod
    def create(
        cls, emulator: RunningEmulator, name: str, api_key: str | None = None, **fields: Any
    ) -> TwinCluster:
        """A cluster of ``name`` (the owner of ``api_key``, else one of its own); ``fields`` add to or
        override the create's body (sizes, ``gpu_type``, ``volume_id``...)."""
        http = httpx.Client(
            base_url=emulator.base_url,
            headers={"Authorization": f"Bearer {api_key or f'twin-{name}'}"},
            timeout=30,
        )
        created = http.post("/v1/compute/clusters", json=create_body(name, **fields))
        assert created.status_code == 200, created.text
        cluster = created.json()
        return cls(
            emulator,
            cluster["cluster_id"],
            kubeconfig_text(cluster["kube_config"]) or "",
            http,
            kube_clients(cluster["kube_config"]),
        )

    def __enter__(self) -> TwinCluster:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.http.delete(f"/v1/compute/clusters/{self.cluster_id}")
        self.api.close()
        self.http.close()

    # --- the compute API ---------------------------------------------------------------------------

    def get(self) -> dict[str, Any]:
        reply = self.http.get(f"/v1/compute/clusters/{self.cluster_id}")
        assert reply.status_code == 200, reply.text
        return dict(reply.json())

    def update(self, **fields: int) -> dict[str, Any]:
        reply = self.http.put(f"/v1/compute/clusters/{self.cluster_id}", json=fields)
        assert reply.status_code == 200, reply.text
        return dict(reply.json())

    def preempt(self, count: int = 1, termination: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"cluster_id": self.cluster_id, "count": count}
        if termination is not None:
            body["termination"] = termination
        reply = self.http.post("/_emulator/kubernetes/preempt", json=body)
        assert reply.status_code == 200, reply.text
        return dict(reply.json())

    # --- Kubernetes ---------------------------------------------------------------------------------

    def nodes(self) -> list[client.V1Node]:
        return list(self.core.list_node().items)

    def node_classes(self) -> dict[str, str]:
        """Every Node's name -> its compute-class label."""
        return {n.metadata.name: (n.metadata.labels or {}).get(COMPUTE_CLASS, "") for n in self.nodes()}

    def wait_for_nodes(self, standard: int, preemptible: int, timeout: float = 120.0) -> list[client.V1Node]:
        """Wait until the cluster has exactly these Ready, schedulable Nodes."""

        def settled() -> list[client.V1Node] | None:
            try:
                nodes = self.nodes()
            except (ApiException, urllib3.exceptions.HTTPError):  # the control plane is still starting
                return None
            classes = [(n.metadata.labels or {}).get(COMPUTE_CLASS) for n in nodes]
            # Ready, and the node lifecycle controller has lifted its not-ready taint (pods can land).
            ready = all(
                not n.spec.unschedulable
                and any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
                and not any(t.key.startswith("node.kubernetes.io/") for t in n.spec.taints or [])
                for n in nodes
            )
            counts = (classes.count("standard"), classes.count("preemptible"))
            return (
                nodes if ready and counts == (standard, preemptible) and len(nodes) == sum(counts) else None
            )

        return wait_for(settled, f"{standard} standard and {preemptible} preemptible Ready nodes", timeout)

    def next_victim(self) -> str:
        """The preemptible node the platform reclaims first: the oldest healthy one (lowest sequence)."""
        healthy = [
            n.metadata.name
            for n in self.nodes()
            if (n.metadata.labels or {}).get(COMPUTE_CLASS) == "preemptible" and not n.spec.unschedulable
        ]
        return min(healthy, key=lambda name: int(name.rsplit("-", 1)[1]))


@dataclass
class Recorder:
    """Watches nodes, events and pods of a cluster in background threads, keeping every change in order
    of the API server's revision (etcd's, one counter for every object, so comparable across kinds)."""

    api: client.ApiClient
    changes: list[tuple[int, str, str, Any]] = field(default_factory=list)
    _threads: list[threading.Thread] = field(default_factory=list)
    _watches: list[watch.Watch] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stopped: threading.Event = field(default_factory=threading.Event)
    _broken: list[str] = field(default_factory=list)

    def start(self) -> Recorder:
        core = client.CoreV1Api(self.api)
        listers = {
            "Node": core.list_node,
            "Event": core.list_event_for_all_namespaces,
            "Pod": core.list_pod_for_all_namespaces,
        }
        ready = threading.Barrier(len(listers) + 1)
        for kind, lister in listers.items():
            thread = threading.Thread(target=self._watch, args=(kind, lister, ready), daemon=True)
            thread.start()
            self._threads.append(thread)
        ready.wait(timeout=30)
        return self

    def _watch(self, kind: str, lister: Callable[..., Any], ready: threading.Barrier) -> None:
        current = lister()
        version = current.metadata.resource_version
        w = watch.Watch()
        self._watches.append(w)
        ready.wait(timeout=30)
        try:
            for event in w.stream(lister, resource_version=version, timeout_seconds=300):
                obj = event["object"]
                with self._lock:
                    self.changes.append((int(obj.metadata.resource_version), kind, event["type"], obj))
        except (ApiException, urllib3.exceptions.HTTPError) as exc:
            # After stop() the stream only ends when the cluster goes away; before it, changes would be missed.
            if not self._stopped.is_set():
                with self._lock:
                    self._broken.append(f"the {kind} watch broke: {exc!r}")

    def stop(self) -> list[tuple[int, str, str, Any]]:
        """Every change seen, in revision order; an AssertionError if a watch broke before now."""
        self._stopped.set()
        for w in self._watches:
            w.stop()
        with self._lock:
            assert not self._broken, self._broken
            return sorted(self.changes, key=lambda change: change[0])

    def first(self, match: Callable[[str, str, Any], bool]) -> tuple[int, str, str, Any] | None:
        """The earliest change (by revision) that ``match(kind, type, object)`` accepts."""
        with self._lock:
            found = [c for c in self.changes if match(c[1], c[2], c[3])]
        return min(found, key=lambda change: change[0]) if found else None


def drill_twin(
    api: client.ApiClient,
    admin: AdminClient,
    twin_url: str,
    mode: TerminationMode,
    node: str | None = None,
) -> DrillReport:
    """One preemption of the demo cluster's twin by ``together-clusters drill`` (of ``node``, else the oldest
    preemptible node), asserted to have run.

    The pool may not refill what a preemption took ("allocated may stay below desired"); these drills need
    the replacement to have a node, so the pool gets free GPUs first.
    """
    admin.set_capacity(DEFAULT_REGION, DEFAULT_GPU_TYPE, 64)
    args = DrillArgs(node=node, twin_url=twin_url, termination=mode, timeout_seconds=240, log_wait_seconds=0)
    report = run_drill(api, args, progress=lambda _line: None)
    assert report.ok, report
    return report


def two_spare_nodes(core: client.CoreV1Api) -> bool:
    """Whether both preemptible nodes are Ready and schedulable: the replacement has a node to go to, so the
    measured delay is the controllers', not a refill's."""
    nodes = core.list_node(label_selector=f"{COMPUTE_CLASS}=preemptible").items
    usable = [
        n
        for n in nodes
        if not n.spec.unschedulable
        and any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
        and not any(t.key.startswith("node.kubernetes.io/") for t in n.spec.taints or [])
    ]
    return len(usable) >= 2


@dataclass
class PodHistory:
    """Watches the pods of one label selector in a background thread (re-watching from the last revision, so
    runs of any length are covered) and keeps, per pod, the kwok-set times its main container ended and
    started running, and the Job it belongs to: the replacement delay and the Job that made the replacement
    survive the pods themselves (a JobSet restart deletes them)."""

    api: client.ApiClient
    namespace: str
    selector: str
    ended: dict[str, datetime] = field(default_factory=dict)
    running: dict[str, datetime] = field(default_factory=dict)
    jobs: dict[str, str] = field(default_factory=dict)
    """The uid of the Job owning each pod."""
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> PodHistory:
        core = client.CoreV1Api(self.api)
        listed = core.list_namespaced_pod(self.namespace, label_selector=self.selector)
        for pod in listed.items:
            self._record(pod)
        thread = threading.Thread(
            target=self._watch, args=(core, listed.metadata.resource_version), daemon=True
        )
        thread.start()
        return self

    def _watch(self, core: client.CoreV1Api, version: str) -> None:
        while not self._stop.is_set():
            w = watch.Watch()
            try:
                for event in w.stream(
                    core.list_namespaced_pod,
                    self.namespace,
                    label_selector=self.selector,
                    resource_version=version,
                    timeout_seconds=30,
                ):
                    version = event["object"].metadata.resource_version
                    self._record(event["object"])
                    if self._stop.is_set():
                        break
            except (
                ApiException,
                urllib3.exceptions.HTTPError,
            ):  # e.g. 410 Gone: list again, go on from there
                if self._stop.wait(0.5):
                    return
                try:
                    listed = core.list_namespaced_pod(self.namespace, label_selector=self.selector)
                except (ApiException, urllib3.exceptions.HTTPError):
                    continue
                for pod in listed.items:
                    self._record(pod)
                version = listed.metadata.resource_version

    def _record(self, pod: Any) -> None:
        uid = pod.metadata.uid
        for owner in pod.metadata.owner_references or []:
            if owner.kind == "Job" and owner.controller:
                with self._lock:
                    self.jobs.setdefault(uid, owner.uid)
        for status in pod.status.container_statuses or []:
            with self._lock:
                if status.state.running and status.state.running.started_at:
                    self.running.setdefault(uid, status.state.running.started_at)
                if status.state.terminated and status.state.terminated.finished_at:
                    self.ended.setdefault(uid, status.state.terminated.finished_at)

    def delay(self, predecessor: str, replacement: str) -> float:
        """Seconds from the predecessor's container ending to its replacement's running (kwok's clock)."""
        ended = wait_for(lambda: self.ended.get(predecessor), f"the end of pod {predecessor}", timeout=30)
        started = wait_for(lambda: self.running.get(replacement), f"pod {replacement} running", timeout=30)
        return (started - ended).total_seconds()

    def delays(self, replaced: list[tuple[str, str]]) -> list[float]:
        """:meth:`delay` of each (predecessor, replacement) pair: to print, a timing is no test's to judge."""
        return [self.delay(old, new) for old, new in replaced]

    def not_in_fresh_jobs(self, replaced: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The (predecessor, replacement) pairs whose replacement the predecessor's own Job made, with that Job.

        A preempted pod's Job delays its next pod by its failure backoff, counting preempted pods too (10 s,
        doubling to 10 minutes): a replacement that a new Job made, one with no failed pod behind it, starts
        without that wait however often its run was preempted. The wait itself is the benchmark's to time."""
        job = {uid: self.job(uid) for pair in replaced for uid in pair}
        return [(old, job[old]) for old, new in replaced if job[new] == job[old]]

    def job(self, pod: str) -> str:
        """The uid of the Job owning ``pod``."""

        def owner() -> str | None:
            with self._lock:
                return self.jobs.get(pod)

        return wait_for(owner, f"the Job of pod {pod}", timeout=30)

    def stop(self) -> None:
        self._stop.set()


def preempt_again_and_again(
    api: client.ApiClient,
    admin: AdminClient,
    twin_url: str,
    running: Callable[[str | None], Any],
    what: str,
    times: int,
) -> tuple[list[tuple[str, str]], list[DrillReport]]:
    """Drill the node of ``what``'s pod ``times`` times, one termination mode after another, each time once it
    runs again: ``running(not_uid)`` is its running pod other than ``not_uid`` (None: any), or None.

    Each (predecessor, replacement) pair of pod uids, and each drill's report.
    """
    replaced, reports = [], []
    modes = itertools.cycle(TerminationMode)
    for _ in range(times):
        pod = wait_for(lambda: running(None), f"{what} to run")
        reports.append(drill_twin(api, admin, twin_url, next(modes), node=pod.spec.node_name))
        old = pod.metadata.uid
        replacement = wait_for(lambda old=old: running(old), f"{what}'s replacement")
        replaced.append((old, replacement.metadata.uid))
    return replaced, reports


@dataclass(frozen=True)
class Stack:
    """A Pulumi project with its stack ``test`` on the real engine, pointed at an emulator with the twin."""

    project: Path
    env: dict[str, str]
    emulator: RunningEmulator

    def set_config(self, key: str, value: str) -> None:
        _engine.run_pulumi(["config", "set", key, value], cwd=self.project, env=self.env, check=True)


def together_clusters_cli(
    project: Path, env: dict[str, str], *args: str, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``together-clusters ARGS --stack test --cwd PROJECT``, the real command line in a subprocess (the
    Automation API it drives runs the engine's ``pulumi`` from ``PATH``)."""
    command = [sys.executable, "-m", "together_clusters.cli", *args, "--stack", "test", "--cwd", str(project)]
    with_engine = {**env, "PATH": f"{_engine.ROOT / '.engine' / 'bin'}{os.pathsep}{env.get('PATH', '')}"}
    return subprocess.run(
        command,
        env=with_engine,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=_engine.ROOT,
    )


def together_clusters_status(
    project: Path, env: dict[str, str], *args: str
) -> subprocess.CompletedProcess[str]:
    """``together-clusters status ARGS`` of the stack ``test`` of ``project``."""
    return together_clusters_cli(project, env, "status", *args)


@contextmanager
def twin_stack(
    tmp: Path,
    name: str,
    program: str,
    api_key: str,
    options: TwinOptions = TwinOptions(),  # noqa: B008 - frozen, so one shared default is safe
    speed: int = 60,
) -> Iterator[Stack]:
    """A stack of ``program`` (project ``name``, state under ``tmp``) on an emulator at ``speed`` whose twin
    runs with ``options``; skipped without the engine or the twin.

    Not destroyed on the way out: everything the stack made lives in this emulator and its twin, which stop
    with it. A ``pulumi destroy`` here asserted nothing and cost minutes (a fleet of three clusters with their
    charts took 10 minutes on a loaded CI machine and overran its timeout, failing a run whose tests had all
    passed); the tests that assert on a destroy run it themselves (``test_engine_destroy_order``,
    ``test_engine_critical``, the kill campaign).
    """
    from .conftest import require_twin  # conftest imports this module

    _engine.require_engine()
    require_twin()
    with start_emulator(speed=speed, kubernetes=options) as emulator:
        project = _engine.write_project(tmp / "prog", name, program)
        env = _engine.engine_env(
            tmp, extra={"TOGETHER_BASE_URL": emulator.base_url, "TOGETHER_API_KEY": api_key}
        )
        _engine.run_pulumi(["stack", "init", "test"], cwd=project, env=env, check=True)
        yield Stack(project, dict(env), emulator)


def module_stack(name: str, program: str, api_key: str, options: TwinOptions, speed: int) -> Any:
    """The module-scoped fixture of one ``twin_stack`` (project ``twin-<name>``) that all of a module's tests
    deploy to, each its own workload (set by stack config): one twin's start-up paid for the lot.
    Assign it to the module's ``stack``."""

    @pytest.fixture(scope="module")
    def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
        tmp = tmp_path_factory.mktemp(name)
        with twin_stack(tmp, f"twin-{name}", program, api_key, options=options, speed=speed) as stack:
            yield stack

    return stack


def up(stack: Stack) -> client.ApiClient:
    """A real ``pulumi up`` (no renderYamlTo) that must succeed; a client of the cluster's Kubernetes API."""
    result = _engine.run_pulumi(["up", *_engine.UP_FLAGS], cwd=stack.project, env=stack.env)
    assert result.returncode == 0, _engine.output(result)
    return kube_clients(_engine.stack_outputs(stack.project, stack.env)["kube_config"])


JOBSETS = ("jobset.x-k8s.io", "v1alpha2", "default", "jobsets")
"""Group, version, namespace and plural of the JobSets in ``default``, for the custom objects API."""


def job_set_manifest(name: str, replicated_job: str = "main", replicas: int = 1) -> dict[str, Any]:
    """A JobSet of ``replicas`` one-pod Jobs that never start a real container (the image does not exist)."""
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name},
        "spec": {
            "replicatedJobs": [
                {
                    "name": replicated_job,
                    "replicas": replicas,
                    "template": {
                        "spec": {
                            "template": {
                                "spec": {
                                    "restartPolicy": "Never",
                                    "containers": [{"name": "main", "image": "registry.invalid/t:1"}],
                                }
                            }
                        }
                    },
                }
            ]
        },
    }


def defaulted_jobset(api: client.ApiClient, name: str) -> dict[str, Any]:
    """Create a JobSet once the API server serves its kind and reaches JobSet's webhooks, and return it:
    JobSet's defaulting webhook fills in its success policy."""
    manifest = job_set_manifest(name)
    custom = client.CustomObjectsApi(api)
    created = wait_for(
        lambda: _create_when_served(custom, manifest), f"JobSet {name} accepted by the webhooks", timeout=60
    )
    return dict(created)


def _create_when_served(custom: client.CustomObjectsApi, manifest: dict[str, Any]) -> dict[str, Any] | None:
    try:
        return dict(custom.create_namespaced_custom_object(*JOBSETS, manifest))
    except ApiException as exc:
        # 404: the CRD is not served yet; 500: the webhook server does not answer yet; 503: a (re)starting
        # API server has not installed every path yet ("please try again").
        if exc.status in (404, 500, 503):
            return None
        raise


def job_set(api: client.ApiClient, name: str) -> dict[str, Any]:
    """The JobSet ``name`` in ``default``, spec and status."""
    found: dict[str, Any] = client.CustomObjectsApi(api).get_namespaced_custom_object(*JOBSETS, name)
    return found


def pods_of_job_set(name: str) -> str:
    """The label selector of a JobSet's pods."""
    return f"jobset.sigs.k8s.io/jobset-name={name}"


def _true_condition(found: dict[str, Any], kind: str) -> dict[str, Any] | None:
    conditions = (found.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind and c["status"] == "True"), None)


def job_set_condition(api: client.ApiClient, name: str, kind: str) -> dict[str, Any] | None:
    """The JobSet's condition ``kind`` (Completed, Failed, ...) when it is True, else None."""
    return _true_condition(job_set(api, name), kind)


def failed_workloads(api: client.ApiClient) -> list[str]:
    """The JobSets and Jobs in ``default`` that ended Failed. A JobSet's own Job failing is its restart on a
    preemption, not a failure: its JobSet says whether the run failed."""
    failed = []
    for found in client.CustomObjectsApi(api).list_namespaced_custom_object(*JOBSETS)["items"]:
        if _true_condition(found, "Failed"):
            failed.append(f"JobSet/{found['metadata']['name']}")
    for job in client.BatchV1Api(api).list_namespaced_job("default").items:
        in_job_set = "jobset.sigs.k8s.io/jobset-name" in (job.metadata.labels or {})
        if not in_job_set and any(
            c.type == "Failed" and c.status == "True" for c in job.status.conditions or []
        ):
            failed.append(f"Job/{job.metadata.name}")
    return failed


def running_pods(core: client.CoreV1Api, selector: str = "") -> list[Any]:
    """The pods in ``default`` matching ``selector`` that run and are not being deleted."""
    pods = core.list_namespaced_pod("default", label_selector=selector).items
    return [p for p in pods if p.status.phase == "Running" and not p.metadata.deletion_timestamp]


def running_pod(core: client.CoreV1Api, selector: str) -> Any:
    """A running pod matching ``selector`` (not being deleted), or None."""
    return next(iter(running_pods(core, selector)), None)


def cluster_view(core: client.CoreV1Api, selector: str = "") -> str:
    """What a failed assertion needs to say why a pod did not come back: each Node (Ready, cordoned, its
    taints) and each pod in ``default`` matching ``selector`` (phase, node, being deleted, its conditions that
    are not True), one per line."""
    lines = []
    for node in core.list_node().items:
        ready = next((c.status for c in node.status.conditions or [] if c.type == "Ready"), "?")
        taints = ",".join(f"{t.key}:{t.effect}" for t in node.spec.taints or [])
        lines.append(
            f"node {node.metadata.name} ready={ready} cordoned={bool(node.spec.unschedulable)} {taints}"
        )
    for pod in core.list_namespaced_pod("default", label_selector=selector).items:
        waiting = [
            f"{c.type}={c.status}({c.reason}: {c.message})"
            for c in pod.status.conditions or []
            if c.status != "True"
        ]
        deleting = " deleting" if pod.metadata.deletion_timestamp else ""
        lines.append(
            f"pod {pod.metadata.name} {pod.status.phase} on {pod.spec.node_name}{deleting} {' '.join(waiting)}"
        )
    return "\n".join(lines)


def pod_log(
    core: client.CoreV1Api, name: str, namespace: str = "default", container: str | None = None
) -> str:
    """A pod's log, or "" while there is none to read. Every refusal is "not yet" to a test that polls a log:
    a pod is Running before kwok has picked up its Logs object (400 "no logs found for container": one test
    read it bare, right after Running, and was red in CI), a pod listed a moment ago may be gone (404), and a
    kubelet being started again answers through the API server with 500 (the supervision test waits on
    exactly that). The poll's own timeout says when "not yet" has lasted too long."""
    try:
        if container is None:
            return str(core.read_namespaced_pod_log(name, namespace) or "")
        return str(core.read_namespaced_pod_log(name, namespace, container=container) or "")
    except ApiException:
        return ""


def ready_deployment(apps: client.AppsV1Api, name: str, namespace: str) -> Any | None:
    """The Deployment (as the ``kubernetes`` client reads it) once it has a ready replica, else None."""
    deployment = apps.read_namespaced_deployment(name, namespace)
    return deployment if (deployment.status.ready_replicas or 0) >= 1 else None


def kept_off_preemptible(deployment: Any) -> bool:
    """Whether a controller's Deployment (as the ``kubernetes`` client reads it) requires nodes whose
    compute-class label is not preemptible, as ClusterControllers gives every controller it installs."""
    affinity = deployment.spec.template.spec.affinity.node_affinity
    (term,) = affinity.required_during_scheduling_ignored_during_execution.node_selector_terms
    (expression,) = term.match_expressions
    return bool(
        (expression.key, expression.operator, expression.values) == (COMPUTE_CLASS, "NotIn", ["preemptible"])
    )


def node_classes(core: client.CoreV1Api) -> dict[str, str]:
    """Node name -> its compute class."""
    return {n.metadata.name: n.metadata.labels[COMPUTE_CLASS] for n in core.list_node().items}


def checkpoint_folder(emulator: RunningEmulator, core: client.CoreV1Api, pod: Any) -> Path:
    """The host folder behind the pod's CHECKPOINT_DIR: the bound volume's folder of the twin's runtime (a
    Together shared volume's own folder, its PV's ``hostPath``)."""
    status = httpx.get(f"{emulator.base_url}/_emulator/kubernetes", timeout=30).json()
    (plane,) = status["control_planes"]
    claim = next(v for v in pod.spec.volumes if v.persistent_volume_claim is not None)
    bound = core.read_namespaced_persistent_volume_claim(claim.persistent_volume_claim.claim_name, "default")
    pv = core.read_persistent_volume(bound.spec.volume_name)
    if VOLUME_ID_LABEL in (pv.metadata.labels or {}):
        volume = Path(pv.spec.host_path.path)
    else:
        volume = root_for(Path(plane["data_dir"])) / "volumes" / bound.spec.volume_name
    (main,) = pod.spec.containers
    mount = next(m.mount_path for m in main.volume_mounts if m.name == claim.name)
    directory = next(e.value for e in main.env if e.name == "CHECKPOINT_DIR")
    return Path(rewrite(directory, {mount: volume}))


FAST_REMEDIATIONS: dict[str, Any] = {
    "pending_s": 30,
    "quarantining_s": 60,
    "quarantined_s": 30,
    "running_s": {mode: 120 for mode in REMEDIATION_MODES.values()},
}
"""Remediation timings short enough for an engine module's clock: at most 240 nominal seconds from the request
to the end, 2-4 s real at the modules' speeds (60-120); the package's own last up to 20 minutes."""


@contextmanager
def fast_remediations(admin: AdminClient, running_s: float | None = None) -> Iterator[None]:
    """The platform's remediations at :data:`FAST_REMEDIATIONS` while inside (each mode's repair lasting
    ``running_s`` when given: a drain is cut short when the VM goes), its own timings restored after."""
    fast = dict(FAST_REMEDIATIONS)
    if running_s is not None:
        fast["running_s"] = {mode: running_s for mode in REMEDIATION_MODES.values()}
    with remediation_timings(admin, fast):
        yield


def _order_back(base_url: str, cluster_id: str, api_key: str, count: int, stop: threading.Event) -> None:
    """Set the cluster's preemptible count back to ``count`` as soon as a repair lowered it (what ``pulumi up``
    of the unchanged program does), until ``stop``."""
    with httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {api_key}"}, timeout=30) as http:
        path = f"/v1/compute/clusters/{cluster_id}"
        while not stop.wait(0.25):
            if (http.get(path).json().get("desired_preemptible_gpus") or count) < count:
                reply = http.put(path, json={"num_preemptible_gpus": count})
                assert reply.status_code == 200, reply.text
                return


def remediation_drill_twin(
    api: client.ApiClient, emulator: RunningEmulator, api_key: str, node: str, mode: str
) -> DrillReport:
    """One ``drill --remediation MODE`` of ``node`` (``mode`` as ``--remediation`` spells it) through the
    emulator's compute API, as the command runs it (the cluster the emulator says owns the node, the instance
    behind it), asserted to have SUCCEEDED. While it watches, an ``evict-without-replacement`` that lowered
    the cluster's preemptible count is answered by setting it back, as the guide says to (``pulumi up``): a
    workload with no spare node has one again. The pool gets free GPUs first (a replacing mode provisions a
    new instance)."""
    emulator.admin.set_capacity(DEFAULT_REGION, DEFAULT_GPU_TYPE, 64)
    cluster_id = emulator.admin.kubernetes_node(node)["cluster_id"]
    stop = threading.Event()
    with TogetherClient(api_key=api_key, base_url=emulator.base_url) as compute:
        desired = compute.get_cluster(cluster_id)
        instance = instance_of(node, cluster_id, desired.gpu_worker_nodes)
        target = RemediationTarget(
            mode=REMEDIATION_MODES[mode],
            cluster_id=cluster_id,
            instance_id=instance,
            poll_seconds=0.25,
            timeout_seconds=300,
        )
        args = DrillArgs(
            node=node, twin_url=emulator.base_url, timeout_seconds=240, log_wait_seconds=0, remediation=target
        )
        count = desired.desired_preemptible_gpus or 0
        order_back = threading.Thread(
            target=_order_back, args=(emulator.base_url, cluster_id, api_key, count, stop), daemon=True
        )
        if REMEDIATION_MODES[mode] == EVICT_WITHOUT_REPLACEMENT:
            order_back.start()
        try:
            report = run_remediation_drill(api, compute, args, progress=lambda _line: None)
        finally:
            stop.set()
            if order_back.is_alive():
                order_back.join()
    assert report.remediation is not None and report.remediation.state == "SUCCEEDED", report
    if REMEDIATION_MODES[mode] == EVICT_WITHOUT_REPLACEMENT:
        # The platform lowered the count: set back by the thread, or here if the drill ended first.
        short = compute_cluster(emulator.base_url, cluster_id, api_key)["desired_preemptible_gpus"] < count
        if short:
            reply = httpx.put(
                f"{emulator.base_url}/v1/compute/clusters/{cluster_id}",
                json={"num_preemptible_gpus": count},
                headers={"Authorization": f"Bearer {api_key}"},
                timeout=30,
            )
            assert reply.status_code == 200, reply.text
    return report


def compute_cluster(base_url: str, cluster_id: str, api_key: str) -> dict[str, Any]:
    """The cluster as the emulator's compute API returns it."""
    reply = httpx.get(
        f"{base_url}/v1/compute/clusters/{cluster_id}",
        headers={"Authorization": f"Bearer {api_key}"},
        timeout=30,
    )
    assert reply.status_code == 200, reply.text
    return dict(reply.json())
