"""Runs the pods that opt in (``twin.together.ai/run: local``), the package's own controllers' (labelled
``together.ai/controller``) and the controller images' as real local processes, as a kubelet would.

Each :meth:`LocalRuntime.sync` (one per twin pass) reads the cluster's opted-in pods that the scheduler has
bound to a node and moves each along a kubelet's path:

- **Start**: the main container's process, as :mod:`.local_pods` plans it (command, env, volumes), in a
  process group of its own; the pod goes Running with a running container status (Ready at once: probes are
  not run). Its stdout and stderr are written to a log file in the CRI format, and a kwok ``Logs`` object
  (owned by the pod) points kwok's kubelet server at it, so ``kubectl logs`` and the API's pod log read it.
- **Exit**: the container's real exit code (a signal ``N`` is ``128+N``), phase Succeeded on 0 and Failed
  otherwise (``restartPolicy: Never``); ``Always`` and ``OnFailure`` restart it in place after the kubelet's
  back-off (10 s doubling to 5 minutes), counting restarts. Whatever the process left in its group is
  killed with it, as a container's cgroup is.
- **Termination**: on a deletion timestamp (an eviction or a delete) or the platform's SIGTERM annotation
  (:data:`~.kwok_config.SIGTERM`), SIGTERM to the main process (as a container runtime sends its stop
  signal to the container's first process), SIGKILL to the whole group once the grace period is over
  (exit 137). The grace period is the pod's (``deletionGracePeriodSeconds``, else
  ``terminationGracePeriodSeconds``) in emulated seconds: it lasts ``grace / speed`` real seconds, the same
  clock the platform's node deletion runs on. A deleted pod whose process has ended is then deleted for good
  (grace 0, the pod's uid as precondition; finalizers such as the Job controller's still hold it). Status
  patches are strategic merges of the container status and the Ready conditions, so a ``DisruptionTarget``
  condition the API server set stays.
- **Gone**: a pod deleted outright (grace 0, its node gone) has its process group killed at once.

Processes are started from the twin's thread with a parent-death signal, and a reaper process
(:mod:`.reaper`) kills every group still running when the emulator ends, even when it is killed.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol, cast

from kubernetes.client import CoreV1Api, CustomObjectsApi, V1DeleteOptions, V1Preconditions
from kubernetes.client.exceptions import ApiException

from . import kwok_config, pod_network, probes
from .controller_images import ControllerImage
from .controller_images import ports as controller_ports
from .controlplane import die_with_parent
from .local_pods import (
    LOCAL_IP,
    Controller,
    Layout,
    Lookups,
    Manifest,
    PodNetwork,
    ProcessPlan,
    Unrunnable,
    describe,
    opted_in,
    plan,
)
from .service_proxy import LocalPod

_log = logging.getLogger("together_clusters.emulator.kubernetes.local_runtime")
_TIMEOUT = 10
DEFAULT_GRACE_SECONDS = 30
BACKOFF_SECONDS = 10.0
MAX_BACKOFF_SECONDS = 300.0
LOG_READY_SECONDS = 5.0
VOLUME_SYNC_SECONDS = 2.0
"""How often a running pod's ConfigMap and Secret volumes are brought up to date (a kubelet: about a minute;
a controller waiting for the certificates it wrote to its Secret should not wait that long here)."""


def now_rfc3339() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _cri_timestamp() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def exit_code(returncode: int) -> int:
    """A container's exit code: a process killed by signal N exits 128+N."""
    return 128 - returncode if returncode < 0 else returncode


class _LogWriter:
    """Copies a process's stdout and stderr into one log file in the CRI format kwok reads
    (``<RFC 3339 time> <stream> <F|P> <line>``)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(path, "ab", buffering=0)  # noqa: SIM115 - closed when both streams end
        self._lock = threading.Lock()
        self._open = 2
        self.threads: list[threading.Thread] = []

    def follow(self, stream: IO[bytes], name: str) -> None:
        thread = threading.Thread(target=self._copy, args=(stream, name), name=f"pod-log-{name}", daemon=True)
        thread.start()
        self.threads.append(thread)

    def _copy(self, stream: IO[bytes], name: str) -> None:
        try:
            for line in iter(stream.readline, b""):
                tag = b"F" if line.endswith(b"\n") else b"P"
                entry = b"%s %s %s %s\n" % (_cri_timestamp().encode(), name.encode(), tag, line.rstrip(b"\n"))
                with self._lock:
                    self._file.write(entry)
        finally:
            stream.close()
            with self._lock:
                self._open -= 1
                if self._open == 0:
                    self._file.close()


@dataclass
class _Container:
    """A pod's process and what the runtime has reported about it."""

    uid: str
    namespace: str
    name: str
    image: str
    plan: ProcessPlan
    restart_policy: str
    process: subprocess.Popen[bytes] | None = None
    started_at: str = ""
    restarts: int = 0
    reported_exit: int | None = None
    restart_at: float | None = None
    terminating: bool = False
    kill_at: float | None = None
    deleted: bool = False
    logs: list[_LogWriter] = field(default_factory=list)
    network: PodNetwork = field(default_factory=PodNetwork)
    readiness: probes.Readiness | None = None
    """The readiness probe's state; ``None``: no probe the runtime can run, ready once started."""
    synced_at: float = 0.0
    controller: Controller | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    ports: Mapping[str, int] = field(default_factory=dict)

    @property
    def ready(self) -> bool:
        running = self.process is not None and self.process.poll() is None
        return running and (self.readiness is None or self.readiness.ready)

    @property
    def container_id(self) -> str:
        return f"local://{self.process.pid}" if self.process is not None else ""


class _Reaper:
    """The reaper process (see :mod:`.reaper`), told of every process group the runtime starts."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None

    def _ensure(self) -> subprocess.Popen[bytes]:
        if self._process is None or self._process.poll() is not None:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "together_clusters.emulator.kubernetes.reaper"],
                stdin=subprocess.PIPE,
                start_new_session=True,
            )
        return self._process

    def _tell(self, line: str) -> None:
        process = self._ensure()
        assert process.stdin is not None
        try:
            process.stdin.write(f"{line}\n".encode())
            process.stdin.flush()
        except BrokenPipeError:
            self._process = None

    def add(self, group: int) -> None:
        self._tell(str(group))

    def forget(self, group: int) -> None:
        self._tell(f"-{group}")

    def stop(self) -> None:
        if self._process is not None and self._process.stdin is not None:
            self._process.stdin.close()
            self._process.wait(timeout=10)
            self._process = None


def _unless_missing(read: Callable[..., Any], namespace: str, name: str) -> Any:
    """``read(name, namespace)``, or ``None`` when the object does not exist (404)."""
    try:
        return read(name, namespace, _request_timeout=_TIMEOUT)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


class _ClusterLookups:
    """ConfigMaps, Secrets and claims read from the API for :func:`.local_pods.plan`."""

    def __init__(self, core: CoreV1Api) -> None:
        self._core = core

    def config_map(self, namespace: str, name: str) -> Mapping[str, str] | None:
        found = _unless_missing(self._core.read_namespaced_config_map, namespace, name)
        return None if found is None else dict(found.data or {})

    def secret(self, namespace: str, name: str) -> Mapping[str, str] | None:
        found = _unless_missing(self._core.read_namespaced_secret, namespace, name)
        return None if found is None else {key: str(value) for key, value in (found.data or {}).items()}

    def service_account_token(self, namespace: str, service_account: str, audience: str | None) -> str:
        spec: dict[str, Any] = {"expirationSeconds": 3600}
        if audience:
            spec["audiences"] = [audience]
        reply = self._core.create_namespaced_service_account_token(
            service_account, namespace, cast(Any, {"spec": spec}), _request_timeout=_TIMEOUT
        )
        assert reply.status is not None
        return str(reply.status.token)

    def claim_volume(self, namespace: str, claim: str) -> str | None:
        try:
            found = self._core.read_namespaced_persistent_volume_claim(
                claim, namespace, _request_timeout=_TIMEOUT
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        bound = found.status is not None and found.status.phase == "Bound"
        return str(found.spec.volume_name) if bound and found.spec and found.spec.volume_name else None


class _NoNewTokens:
    """Lookups that ask the API for no service account token (a projected token is not among the files a
    running pod's volumes are refreshed with: :attr:`.local_pods.ProcessPlan.synced`)."""

    def __init__(self, lookups: Lookups) -> None:
        self._lookups = lookups

    def config_map(self, namespace: str, name: str) -> Mapping[str, str] | None:
        return self._lookups.config_map(namespace, name)

    def secret(self, namespace: str, name: str) -> Mapping[str, str] | None:
        return self._lookups.secret(namespace, name)

    def claim_volume(self, namespace: str, claim: str) -> str | None:
        return self._lookups.claim_volume(namespace, claim)

    def service_account_token(self, namespace: str, service_account: str, audience: str | None) -> str:
        return ""


def _grace_seconds(pod: Manifest) -> float:
    deleting = pod["metadata"].get("deletionGracePeriodSeconds")
    if deleting is not None:
        return float(deleting)
    own = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    return float(DEFAULT_GRACE_SECONDS if own is None else own)


def _asked_to_stop(pod: Manifest) -> bool:
    meta = pod["metadata"]
    return meta.get("deletionTimestamp") is not None or kwok_config.SIGTERM in (meta.get("annotations") or {})


class RealSeconds(Protocol):
    """Real seconds for a duration of the platform's clock (``EmulatedClock.duration``)."""

    def __call__(self, nominal_seconds: float, /) -> float: ...


def _same_seconds(nominal_seconds: float, /) -> float:
    return nominal_seconds


class LocalRuntime:
    """The kubelet of every opted-in pod of one cluster. Call :meth:`sync` and :meth:`stop` from the one
    thread that lives as long as the processes should (their parent-death signal follows it)."""

    def __init__(
        self,
        core: CoreV1Api,
        root: Path,
        duration: RealSeconds = _same_seconds,
        python: str = sys.executable,
        controllers: Mapping[str, tuple[ControllerImage, Path]] | None = None,
    ) -> None:
        """``controllers``: the controller images run as local binaries (see :mod:`.controller_images`),
        image reference -> (profile, binary)."""
        self._core = core
        self._controllers = dict(controllers or {})
        self._api_server = str(core.api_client.configuration.host)
        self._custom = CustomObjectsApi(core.api_client)
        self._layout = Layout(root)
        self._lookups = _ClusterLookups(core)
        self._duration = duration
        self._python = python
        self._containers: dict[str, _Container] = {}
        self._waiting: dict[str, str] = {}
        self._reaper = _Reaper()
        self._pod_ips = pod_network.PodIPs()

    def runs(self, pod: Manifest) -> bool:
        """Whether this runtime runs the pod: it opted in or is the package's own controller's
        (:func:`~.local_pods.opted_in`), or its image is a known controller's."""
        containers = (pod.get("spec") or {}).get("containers") or []
        return opted_in(pod) or bool(containers and containers[0].get("image") in self._controllers)

    def network(self) -> list[LocalPod]:
        """The running pods as the network sees them (for the API server's egress proxy)."""
        return [
            LocalPod(
                namespace=c.namespace,
                labels=c.labels,
                pod_ip=c.network.pod_ip,
                host_ip=c.network.host_ip,
                ports=c.ports,
                ready=c.ready,
            )
            for c in self._containers.values()
            if c.controller is not None
        ]

    def pids(self) -> list[int]:
        """The PIDs of the pods' processes that still run."""
        return [
            c.process.pid
            for c in self._containers.values()
            if c.process is not None and c.process.poll() is None
        ]

    # --- the pass ---------------------------------------------------------------------------------

    def sync(self, shared_volumes: Mapping[str, Path] | None = None) -> None:
        """Start, report, terminate and forget processes to match the cluster's opted-in pods.

        ``shared_volumes``: the cluster's shared volumes' PersistentVolumes, name -> the volume's folder
        (see :class:`.local_pods.Layout`); ``None`` keeps the last ones.
        """
        if shared_volumes is not None and shared_volumes != self._layout.shared_volumes:
            self._layout = Layout(self._layout.root, dict(shared_volumes))
        # From the API server's watch cache (resourceVersion 0): cheap enough for every pass.
        reply: Any = self._core.list_pod_for_all_namespaces(
            resource_version="0", _request_timeout=_TIMEOUT, _preload_content=False
        )
        pods = [
            p
            for p in json.loads(reply.data)["items"]
            if self.runs(p) and (p.get("spec") or {}).get("nodeName")
        ]
        by_uid = {p["metadata"]["uid"]: p for p in pods}
        for uid in [u for u in self._containers if u not in by_uid]:
            self._forget(self._containers.pop(uid))
        for uid in [u for u in self._waiting if u not in by_uid]:
            self._waiting.pop(uid)
        for pod in by_uid.values():
            try:
                self._step(pod)
            except ApiException as exc:
                if exc.status not in (404, 409):
                    raise

    def stop(self) -> None:
        """Kill every process (the emulator is stopping) and the reaper."""
        for container in self._containers.values():
            self._forget(container)
        self._containers.clear()
        self._reaper.stop()

    def _forget(self, container: _Container) -> None:
        self._kill(container)
        pod_network.release(container.network)

    # --- one pod ----------------------------------------------------------------------------------

    def _step(self, pod: Manifest) -> None:
        meta = pod["metadata"]
        uid = meta["uid"]
        phase = (pod.get("status") or {}).get("phase")
        container = self._containers.get(uid)
        if container is None:
            if phase in ("Succeeded", "Failed") or meta.get("deletionTimestamp") is not None:
                # Never started here (or the emulator restarted): nothing runs; a deleted pod goes for good.
                if meta.get("deletionTimestamp") is not None:
                    self._delete(pod)
                return
            self._start(pod)
            return
        process = container.process
        assert process is not None
        returncode = process.poll()
        if returncode is None:
            self._terminate_if_asked(container, pod)
            if not container.terminating:
                self._probe(container, pod)
                self._sync_volume_files(container, pod)
            return
        if container.reported_exit is None:
            self._exited(container, pod, exit_code(returncode))
        if container.restart_at is not None and _asked_to_stop(pod):
            # Told to stop during the restart back-off: no restart, the pod ends with the last exit.
            container.restart_at = None
            container.terminating = True
            self._patch_status(pod, {"phase": "Succeeded" if container.reported_exit == 0 else "Failed"})
        if container.terminating or phase in ("Succeeded", "Failed"):
            if meta.get("deletionTimestamp") is not None and not container.deleted:
                container.deleted = self._delete(pod)
            return
        if container.restart_at is not None and time.monotonic() >= container.restart_at:
            self._spawn(container, pod)

    def _controller_of(self, pod: Manifest) -> Controller | None:
        image = pod["spec"]["containers"][0].get("image")
        if image not in self._controllers:
            return None
        profile, binary = self._controllers[image]
        return Controller(profile=profile, binary=binary, api_server=self._api_server)

    def _plan(
        self,
        pod: Manifest,
        network: PodNetwork,
        controller: Controller | None,
        lookups: Lookups | None = None,
    ) -> ProcessPlan:
        return plan(
            pod,
            lookups or self._lookups,
            self._layout,
            self._python,
            self._duration,
            network=network,
            controller=controller,
            api_server=self._api_server,
        )

    def _start(self, pod: Manifest) -> None:
        meta = pod["metadata"]
        uid = meta["uid"]
        controller = self._controller_of(pod)
        # A controller binds its ports as in a network namespace of its own: a loopback address of its own.
        network = (
            self._pod_ips.allocate(controller_ports(pod["spec"]["containers"][0]).values())
            if controller is not None
            else PodNetwork()
        )
        try:
            process_plan = self._plan(pod, network, controller)
        except Unrunnable as exc:
            pod_network.release(network)
            if self._waiting.get(uid) != str(exc):
                self._waiting[uid] = str(exc)
                self._patch_waiting(pod, exc)
            return
        self._waiting.pop(uid, None)
        spec = pod["spec"]
        main = spec["containers"][0]
        container = _Container(
            uid=uid,
            namespace=meta["namespace"],
            name=meta["name"],
            image=spec["containers"][0].get("image", ""),
            plan=process_plan,
            restart_policy=spec.get("restartPolicy", "Always"),
            network=network,
            readiness=probes.Readiness.of(main, network.host_ip, self._duration),
            controller=controller,
            labels=dict(meta.get("labels") or {}),
            ports=controller_ports(main),
        )
        for folder in process_plan.folders:
            folder.mkdir(parents=True, exist_ok=True)
        for path, data in process_plan.files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        self._containers[uid] = container
        self._publish_logs(pod, process_plan)
        self._spawn(container, pod)

    def _spawn(self, container: _Container, pod: Manifest) -> None:
        process_plan = container.plan
        try:
            process = subprocess.Popen(
                list(process_plan.argv),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=process_plan.cwd,
                env=dict(process_plan.env),
                preexec_fn=die_with_parent,
                start_new_session=True,
            )
        except OSError as exc:  # no such program: the container cannot start, as with a bad entrypoint
            self._containers.pop(container.uid)
            self._patch_waiting(pod, Unrunnable("RunContainerError", f"{describe(process_plan)}: {exc}"))
            return
        self._reaper.add(process.pid)
        if container.process is not None:
            container.restarts += 1
        container.process = process
        if container.readiness is not None:  # a new container is not ready until its probe passes again
            container.readiness.restart(time.monotonic())
        container.started_at = now_rfc3339()
        container.reported_exit = None
        container.restart_at = None
        writer = _LogWriter(process_plan.log_file)
        assert process.stdout is not None and process.stderr is not None
        writer.follow(process.stdout, "stdout")
        writer.follow(process.stderr, "stderr")
        container.logs.append(writer)
        _log.info(
            "pod %s/%s: started %s (pid %d)",
            container.namespace,
            container.name,
            describe(process_plan),
            process.pid,
        )
        self._patch_running(pod, container)
        # Asked to stop before it even started (a delete raced the start): the signal follows at once.
        self._terminate_if_asked(container, pod)

    def _probe(self, container: _Container, pod: Manifest) -> None:
        """Run the readiness probe when due; report a change of readiness."""
        readiness = container.readiness
        now = time.monotonic()
        if readiness is None or not readiness.due(now):
            return
        if readiness.run(now):
            _log.info("pod %s/%s: ready=%s", container.namespace, container.name, readiness.ready)
            self._patch_running(pod, container)

    def _sync_volume_files(self, container: _Container, pod: Manifest) -> None:
        """Bring the ConfigMap and Secret volumes mounted whole up to date, as a kubelet does while a pod
        runs (a controller that wrote its webhook certificates to its Secret waits for them to appear)."""
        now = time.monotonic()
        if not container.plan.synced_folders or now - container.synced_at < VOLUME_SYNC_SECONDS:
            return
        container.synced_at = now
        try:
            # Only the ConfigMap and Secret files are wanted: no new service account token per refresh.
            current = self._plan(pod, container.network, container.controller, _NoNewTokens(self._lookups))
        except Unrunnable:
            return  # a volume's source went away: a kubelet keeps the last files
        for path in container.plan.synced & current.synced:
            data = current.files.get(path)
            if data is not None and (not path.is_file() or path.read_bytes() != data):
                partial = path.with_name(f".{path.name}.partial")
                partial.write_bytes(data)
                partial.replace(path)  # whole or not at all, as the kubelet's atomic writer
        for path in current.synced - container.plan.synced:  # a key added to the Secret
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(current.files[path])
        self._mark_certificate(container)

    def _mark_certificate(self, container: _Container) -> None:
        """For a program that checks a fixed folder for its certificate (see :mod:`.controller_images`): a
        copy there once the pod's own mounted certificate exists."""
        fixed = container.controller.profile.waits_for_certificate_in if container.controller else None
        if fixed is None or fixed not in container.plan.mounts:
            return
        own = container.plan.mounts[fixed] / "tls.crt"
        marker = Path(fixed) / "tls.crt"
        if own.is_file() and not marker.is_file():
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_bytes(own.read_bytes())

    def _terminate_if_asked(self, container: _Container, pod: Manifest) -> None:
        process = container.process
        assert process is not None
        if not _asked_to_stop(pod):
            return
        deadline = time.monotonic() + self._duration(_grace_seconds(pod))
        if not container.terminating:
            container.terminating = True
            container.kill_at = deadline
            # As a container runtime does: the stop signal to the main process only, the kill to them all.
            _signal(process, signal.SIGTERM)
        elif container.kill_at is not None and deadline < container.kill_at:
            container.kill_at = (
                deadline  # a second delete with a shorter grace shortens it, as the kubelet does
            )
        if container.kill_at is not None and time.monotonic() >= container.kill_at:
            _signal_group(process, signal.SIGKILL)
            container.kill_at = None

    def _exited(self, container: _Container, pod: Manifest, code: int) -> None:
        process = container.process
        assert process is not None
        _signal_group(process, signal.SIGKILL)  # the rest of the container goes with its main process
        self._reaper.forget(process.pid)
        for writer in container.logs:
            for thread in writer.threads:
                thread.join(timeout=2)
        container.logs.clear()
        container.reported_exit = code
        restart = not container.terminating and (
            container.restart_policy == "Always" or (container.restart_policy == "OnFailure" and code != 0)
        )
        if restart:
            backoff = min(MAX_BACKOFF_SECONDS, BACKOFF_SECONDS * 2**container.restarts)
            container.restart_at = time.monotonic() + backoff
        _log.info("pod %s/%s: exited with %d", container.namespace, container.name, code)
        self._patch_exited(pod, container, code, restart)

    def _kill(self, container: _Container) -> None:
        process = container.process
        if process is None:
            return
        _signal_group(process, signal.SIGKILL)
        process.wait()
        self._reaper.forget(process.pid)

    # --- the API ----------------------------------------------------------------------------------

    def _publish_logs(self, pod: Manifest, process_plan: ProcessPlan) -> None:
        meta = pod["metadata"]
        body = {
            "apiVersion": f"{kwok_config.LOGS_GROUP}/{kwok_config.LOGS_VERSION}",
            "kind": kwok_config.LOGS_KIND,
            "metadata": {
                "name": meta["name"],
                "namespace": meta["namespace"],
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"]}
                ],
            },
            "spec": {
                "logs": [
                    {
                        "containers": [process_plan.container],
                        "logsFile": str(process_plan.log_file),
                        "follow": True,
                    }
                ]
            },
        }
        args = (kwok_config.LOGS_GROUP, kwok_config.LOGS_VERSION, meta["namespace"], kwok_config.LOGS_PLURAL)
        process_plan.log_file.parent.mkdir(parents=True, exist_ok=True)
        process_plan.log_file.touch()
        try:
            self._custom.create_namespaced_custom_object(*args, body, _request_timeout=_TIMEOUT)
        except ApiException as exc:
            if exc.status != 409:  # a pod of the same name before: point its Logs at this one
                raise
            self._custom.delete_namespaced_custom_object(*args, meta["name"], _request_timeout=_TIMEOUT)
            self._custom.create_namespaced_custom_object(*args, body, _request_timeout=_TIMEOUT)
        # kwok picks the object up through a watch: wait until the API serves the log, so that a pod reported
        # Running has a readable log, as on a kubelet.
        deadline = time.monotonic() + LOG_READY_SECONDS
        while time.monotonic() < deadline:
            try:
                self._core.read_namespaced_pod_log(
                    meta["name"],
                    meta["namespace"],
                    container=process_plan.container,
                    _request_timeout=_TIMEOUT,
                )
                return
            except ApiException:
                time.sleep(0.05)
        _log.warning("pod %s/%s: kwok does not serve its log yet", meta["namespace"], meta["name"])

    def _patch_status(self, pod: Manifest, status: Manifest) -> None:
        meta = pod["metadata"]
        self._core.patch_namespaced_pod_status(
            meta["name"],
            meta["namespace"],
            {"metadata": {"uid": meta["uid"]}, "status": status},
            _request_timeout=_TIMEOUT,
        )

    def _patch_waiting(self, pod: Manifest, why: Unrunnable) -> None:
        main = pod["spec"]["containers"][0]
        status = {
            "containerStatuses": [
                {
                    "name": main["name"],
                    "image": main.get("image", ""),
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "started": False,
                    "state": {"waiting": {"reason": why.reason, "message": why.message}},
                }
            ]
        }
        _log.warning("pod %s/%s cannot start: %s", pod["metadata"]["namespace"], pod["metadata"]["name"], why)
        self._patch_status(pod, status)

    def _patch_running(self, pod: Manifest, container: _Container) -> None:
        now = now_rfc3339()
        ready = container.ready
        pod_ip = container.network.pod_ip
        status = {
            "phase": "Running",
            "startTime": (pod.get("status") or {}).get("startTime") or now,
            "hostIP": LOCAL_IP,
            "hostIPs": [{"ip": LOCAL_IP}],
            "podIP": pod_ip,
            "podIPs": [{"ip": pod_ip}],
            "conditions": [
                {"type": kind, "status": "True", "lastTransitionTime": now}
                for kind in ("PodReadyToStartContainers", "Initialized")
            ]
            + [
                {"type": kind, "status": str(ready), "lastTransitionTime": now}
                for kind in ("ContainersReady", "Ready")
            ],
            "containerStatuses": [
                {
                    "name": container.plan.container,
                    "image": container.image,
                    "imageID": "",
                    "containerID": container.container_id,
                    "ready": ready,
                    "started": True,
                    "restartCount": container.restarts,
                    "state": {
                        "waiting": None,
                        "terminated": None,
                        "running": {"startedAt": container.started_at},
                    },
                }
            ],
        }
        self._patch_status(pod, status)

    def _patch_exited(self, pod: Manifest, container: _Container, code: int, restarting: bool) -> None:
        now = now_rfc3339()
        terminated = {
            "exitCode": code,
            "reason": "Completed" if code == 0 else "Error",
            "startedAt": container.started_at,
            "finishedAt": now,
            "containerID": container.container_id,
        }
        state: Manifest = {"running": None, "terminated": terminated, "waiting": None}
        last: Manifest | None = None
        if restarting:
            state = {"running": None, "terminated": None, "waiting": {"reason": "CrashLoopBackOff"}}
            last = {"terminated": terminated}
        not_ready = [
            {"type": kind, "status": "False", "reason": "PodCompleted", "lastTransitionTime": now}
            for kind in ("ContainersReady", "Ready")
        ]
        container_status: Manifest = {
            "name": container.plan.container,
            "image": container.image,
            "imageID": "",
            "containerID": container.container_id,
            "ready": False,
            "started": False,
            "restartCount": container.restarts,
            "state": state,
        }
        if last is not None:
            container_status["lastState"] = last
        status: Manifest = {"conditions": not_ready, "containerStatuses": [container_status]}
        if not restarting:
            status["phase"] = "Succeeded" if code == 0 else "Failed"
        self._patch_status(pod, status)

    def _delete(self, pod: Manifest) -> bool:
        """The kubelet's final delete of a pod whose containers have ended: grace 0, this very pod."""
        meta = pod["metadata"]
        try:
            self._core.delete_namespaced_pod(
                meta["name"],
                meta["namespace"],
                body=V1DeleteOptions(grace_period_seconds=0, preconditions=V1Preconditions(uid=meta["uid"])),
                _request_timeout=_TIMEOUT,
            )
        except ApiException as exc:
            if exc.status not in (404, 409):
                raise
        return True


def _signal(process: subprocess.Popen[bytes], signum: int) -> None:
    try:
        process.send_signal(signum)
    except ProcessLookupError:
        pass


def _signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
    try:
        os.killpg(process.pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def root_for(plane_directory: Path) -> Path:
    """Where a cluster's local runtime keeps pods' folders, volumes and logs."""
    return plane_directory / "local"
