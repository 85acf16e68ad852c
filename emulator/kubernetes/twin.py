"""Keeps every emulated cluster's control plane in step with the platform, from one background thread.

Each pass (a few per second) takes a :class:`~together_clusters.emulator.kubernetes.nodes.ClusterView` of every
cluster from the platform, then: starts the control plane of a new cluster (etcd and the API server first,
the controllers and kwok once the API answers), stops and forgets the one of a cluster that is gone, and on a
running one creates and deletes Nodes to match the view, plays the preemption drill on nodes the platform
has just cordoned and the states its remediations entered (cordon, drain or kill, uncordon: :mod:`.repairs`);
then the cluster's local runtime runs the pods that opted in as real processes
(:mod:`together_clusters.emulator.kubernetes.local_runtime`). Reading the platform each pass also moves its timers along, so a preempted node is deleted
on time even when nobody calls the API.

The processes are started from this thread, which lives as long as the twin: they carry a parent-death signal
tied to it (see :mod:`together_clusters.emulator.kubernetes.controlplane`).
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from kubernetes.client import ApiClient, ApiextensionsV1Api, Configuration, CoreV1Api, StorageV1Api
from kubernetes.client.exceptions import ApiException

from together_clusters.errors import TwinError, TwinTimeout
from together_clusters.platform import TerminationMode
from together_clusters.sequences import preemption

from ..remediations import RemediationTransition
from . import controller_images, jobset, kwok_config, repairs, service_proxy, shared_volumes
from .binaries import Binaries
from .controlplane import ControlPlane
from .demand import Demand, demand_of
from .kubeconfig import KubeApi
from .kwok_signal import KWOK_SIGNAL
from .local_runtime import LocalRuntime, root_for
from .nodes import ClusterView, NodeView, node_manifest
from .options import TwinOptions
from .restarts import Restarts

_log = logging.getLogger("together_clusters.emulator.kubernetes")
_PASS_INTERVAL_S = 0.2
_TIMEOUT = 10


class _Plane:
    """A cluster's control plane and what the twin tracks about it."""

    def __init__(self, control_plane: ControlPlane) -> None:
        self.control_plane = control_plane
        self.phase = "api-starting"
        self.core: CoreV1Api | None = None
        self.client: ApiClient | None = None
        self.runtime: LocalRuntime | None = None
        # Preempted nodes whose pods are not all terminated yet (evictions refused by a budget): node -> mode.
        self.draining: dict[str, TerminationMode] = {}
        # Remediation transitions still to play on the Nodes, oldest first (see :mod:`.repairs`).
        self.repairs: list[RemediationTransition] = []
        self.started = time.monotonic()
        self.ready_after_s: float | None = None
        # JobSet: None (nothing done yet), "off", "installed" (CRD, RBAC, webhooks), "starting", "running".
        self.jobset: str | None = None
        self.restarts = Restarts()
        # Processes started again on a new port whose users are not yet pointed at it (see _follow_moved_ports).
        self.moved: set[str] = set()
        # The shared volumes' PersistentVolumes as last made or patched: volume name -> capacity.
        self.volumes: dict[str, str] = {}
        # The API server's way to Services of the pods the local runtime runs (see :mod:`.service_proxy`).
        self.egress = service_proxy.EgressProxy(control_plane.egress_socket)
        # False while the API server is frozen (see Twin.set_answering): the cluster is left alone meanwhile.
        self.answering = True


def _nothing_to_reclaim(cluster_id: str, node_name: str) -> None:
    return None


def _same_seconds(seconds: float) -> float:
    return seconds


@dataclass(frozen=True)
class TwinHooks:
    """What the twin reads from its platform and tells it: the platform's side of the twin."""

    view: Callable[[], list[ClusterView]]
    """Every cluster as its twin should be now (read each pass; also moves the platform's timers along)."""
    attach: Callable[[str, KubeApi], None]
    """A cluster's control plane has a new address (a cluster from before the twin, or its port was taken)."""
    serving: Callable[[str], None]
    """A cluster's control plane serves (controllers, JobSet), each time it comes up."""
    failed: Callable[[str], None]
    """The twin gave up on a cluster's control plane (a process that keeps ending)."""
    exited: Callable[[str, str], None] = _nothing_to_reclaim
    """Every pod of a preempted Node (cluster id, Node name) has exited: the platform reclaims it."""
    duration: Callable[[float], float] = _same_seconds
    """Real seconds for a duration of the platform's clock (local processes' grace periods)."""
    volume_ids: Callable[[], Collection[str]] | None = None
    """The shared volumes the platform still has (``None``: their folders are never removed)."""
    demand: Callable[[str, Demand], None] | None = None
    """An autoscaling cluster's demand (cluster id, what its pods ask), read from its pods each pass."""


class Twin:
    """The control planes of every cluster of one platform. :meth:`start` it once, :meth:`stop` it once.

    ``hooks``: how it reads the platform's clusters and tells it what became of them. ``keep_data``: the
    control planes' data stays in ``root`` when the twin stops (else it is removed).
    """

    def __init__(
        self, binaries: Binaries, root: Path, options: TwinOptions, hooks: TwinHooks, keep_data: bool
    ) -> None:
        self.binaries = binaries
        self.root = root
        # The shared volumes' folders (see :mod:`.shared_volumes`): the volume's, not a cluster's, so they
        # outlive the clusters they are attached to; removed once the platform has deleted the volume.
        self.volumes_root = root / "volumes"
        self.options = options
        self._hooks = hooks
        self._keep_data = keep_data
        self._planes: dict[str, _Plane] = {}
        self._modes: dict[tuple[str, str], TerminationMode] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kubernetes-twin", daemon=True)
        self.errors: list[str] = []
        # The controller images of charts a user installs, run as the binaries built beside the twin's.
        self._controllers = controller_images.known(binaries.kubernetes.parent, binaries.versions())

    # --- called by the platform, under its lock -----------------------------------------------------

    def prepare(self, cluster_id: str, cluster_name: str, token: str) -> KubeApi:
        """Credentials and a port for a new cluster, so its kubeconfig is final at once (no process yet)."""
        api = ControlPlane(self.binaries, self.root / cluster_id, cluster_name, token).prepare()
        self._wake.set()
        return api

    def set_termination(self, cluster_id: str, node_names: list[str], mode: TerminationMode) -> None:
        """Terminate the pods of these just-preempted nodes by ``mode`` instead of the default."""
        with self._lock:
            for name in node_names:
                self._modes[(cluster_id, name)] = mode
        self._wake.set()

    def set_answering(self, cluster_id: str, answering: bool) -> bool | None:
        """Make the cluster's API server stop answering (frozen: connections hang, as behind a cut network)
        or answer again, returning once it took effect. While it does not answer, the twin leaves the cluster
        alone (its nodes, pods and repairs wait), so the other clusters keep their pace. ``None`` for a
        cluster without a control plane; ``False`` if its API server is not running (ended, or not started
        yet): it is then not frozen."""
        with self._lock:
            plane = self._planes.get(cluster_id)
            if plane is None:
                return None
            taken = plane.control_plane.set_answering(answering)
            plane.answering = answering if taken else True
        self._wake.set()
        return taken

    # --- lifecycle ------------------------------------------------------------------------------------

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop every control plane (data kept with a state file, else removed) and the thread."""
        self._stopping.set()
        self._wake.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=120)

    def status(self) -> list[dict[str, Any]]:
        """Each cluster's control plane: phase, API server, PIDs, seconds from start to ready."""
        with self._lock:
            return [
                {
                    "cluster_id": cid,
                    "phase": plane.phase,
                    "answering": plane.answering,
                    "server": plane.control_plane.kube_api.server,
                    "pids": plane.control_plane.pids(),
                    "pod_pids": plane.runtime.pids() if plane.runtime is not None else [],
                    "ready_after_s": plane.ready_after_s,
                    "jobset": plane.jobset,
                    "restarts": dict(plane.restarts.total),
                    "data_dir": str(plane.control_plane.directory),
                    "audit_log": str(path) if (path := plane.control_plane.audit_log_path) else None,
                }
                for cid, plane in self._planes.items()
            ]

    def wait_ready(self, cluster_id: str, timeout: float = 120.0) -> None:
        """Block until the cluster's control plane runs its controllers (for tests and tools).

        Raises ``TwinTimeout`` (a ``TimeoutError``) after ``timeout`` seconds, ``TwinError`` once the twin
        has given up on the control plane.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                plane = self._planes.get(cluster_id)
                if plane is not None and plane.phase == "ready":
                    return
                if plane is not None and plane.phase == "failed":
                    raise TwinError("; ".join(self.errors))
            time.sleep(0.1)
        raise TwinTimeout(f"the control plane of cluster {cluster_id} was not ready after {timeout:g}s")

    # --- the loop -------------------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                try:
                    self._pass()
                except Exception as exc:  # keep the twin alive; the next pass retries
                    _log.warning("kubernetes twin pass failed: %s", exc)
                self._wake.wait(_PASS_INTERVAL_S)
                self._wake.clear()
        finally:
            for cluster_id in list(self._planes):
                self._retire(cluster_id, remove_data=not self._keep_data)
            if not self._keep_data:
                shutil.rmtree(self.root, ignore_errors=True)

    def _pass(self) -> None:
        if self._hooks.volume_ids is not None:
            self._forget_deleted_volumes(self._hooks.volume_ids())
        views = {v.cluster_id: v for v in self._hooks.view()}
        for cluster_id in [c for c in self._planes if c not in views]:
            self._retire(cluster_id, remove_data=True)
        for cluster_id, view in views.items():
            if self._stopping.is_set():
                return
            plane = self._planes.get(cluster_id) or self._launch(view)
            if not plane.answering:
                continue
            try:
                self._step(plane, view)
            except (ApiException, OSError) as exc:
                _log.warning("kubernetes twin of cluster %s: %s", cluster_id, exc)

    def _launch(self, view: ClusterView) -> _Plane:
        control_plane = ControlPlane(
            self.binaries,
            self.root / view.cluster_id,
            view.cluster_name,
            view.kube_token,
            local_images=tuple(sorted(self._controllers)),
        )
        control_plane.job_pod_failure_backoff = self.options.job_pod_failure_backoff
        control_plane.audit_log = self.options.audit_log
        api = control_plane.prepare()
        if api != view.kube_api:  # a cluster from before the twin, or its port was taken meanwhile
            self._hooks.attach(view.cluster_id, api)
        control_plane.start_api()
        plane = _Plane(control_plane)
        with self._lock:
            self._planes[view.cluster_id] = plane
        return plane

    def _retire(self, cluster_id: str, remove_data: bool) -> None:
        with self._lock:
            plane = self._planes.pop(cluster_id)
            self._modes = {k: v for k, v in self._modes.items() if k[0] != cluster_id}
        plane.control_plane.set_answering(True)  # a frozen process takes no SIGTERM
        if plane.runtime is not None:
            plane.runtime.stop()
        plane.egress.close()
        if plane.client is not None:
            plane.client.close()
        plane.control_plane.stop()
        if remove_data:
            shutil.rmtree(plane.control_plane.directory, ignore_errors=True)

    def _step(self, plane: _Plane, view: ClusterView) -> None:
        control_plane = plane.control_plane
        plane.repairs.extend(view.remediations)
        if plane.phase == "failed":
            return
        if not self._supervise(plane, view.cluster_id):
            plane.phase = "failed"
            self._hooks.failed(view.cluster_id)
            return
        if plane.phase == "api-starting":
            if not control_plane.api_ready():
                return
            plane.client = _client(control_plane)
            plane.core = CoreV1Api(plane.client)
            _bootstrap(plane.client)
            control_plane.start_controllers()
            plane.phase = "controllers-starting"
        if plane.phase == "controllers-starting":
            assert plane.core is not None and plane.client is not None
            accounts = _default_service_account(plane.core)
            if not self._jobset_running(plane, plane.client) or not accounts:
                return
            plane.ready_after_s = time.monotonic() - plane.started
            plane.runtime = LocalRuntime(
                plane.core,
                root_for(control_plane.directory),
                self._hooks.duration,
                controllers=self._controllers,
            )
            plane.phase = "ready"
            self._hooks.serving(view.cluster_id)
        assert plane.core is not None and plane.runtime is not None
        self._sync_nodes(view, plane, plane.core)
        self._report_demand(view, plane.core)
        self._play_repairs(plane, plane.core)
        self._sync_volumes(view, plane, plane.core)
        plane.runtime.sync(
            {
                v.volume_name: shared_volumes.folder_of(self.volumes_root, v.volume_id)
                for v in view.volumes
                if v.volume_name in plane.volumes
            }
        )
        self._route_services(plane, plane.core, plane.runtime)

    def _route_services(self, plane: _Plane, core: CoreV1Api, runtime: LocalRuntime) -> None:
        """Point the API server's egress proxy at the local pods behind each Service (webhooks)."""
        pods = runtime.network()
        if not pods:
            plane.egress.set_routes({})
            return
        reply: Any = core.list_service_for_all_namespaces(
            resource_version="0", _request_timeout=_TIMEOUT, _preload_content=False
        )
        plane.egress.set_routes(service_proxy.routes(json.loads(reply.data)["items"], pods))

    def _report_demand(self, view: ClusterView, core: CoreV1Api) -> None:
        """Tell the platform what an autoscaling cluster's pods ask: GPUs pending for lack of GPUs, the nodes
        running a pod (see :mod:`.demand`)."""
        if not view.autoscales or self._hooks.demand is None:
            return
        reply: Any = core.list_pod_for_all_namespaces(
            resource_version="0", _request_timeout=_TIMEOUT, _preload_content=False
        )
        self._hooks.demand(view.cluster_id, demand_of(json.loads(reply.data)["items"]))

    def _sync_volumes(self, view: ClusterView, plane: _Plane, core: CoreV1Api) -> None:
        """A static PersistentVolume per attached shared volume, its capacity the volume's size."""
        for volume in view.volumes:
            wanted = shared_volumes.capacity(volume)
            if plane.volumes.get(volume.volume_name) == wanted:
                continue
            folder = shared_volumes.folder_of(self.volumes_root, volume.volume_id)
            folder.mkdir(parents=True, exist_ok=True)
            manifest = shared_volumes.persistent_volume(volume, folder)
            try:
                core.create_persistent_volume(cast(Any, manifest), _request_timeout=_TIMEOUT)
            except ApiException as exc:
                if exc.status != 409:  # 409: made before (the emulator restarted), or a grow to follow
                    raise
                core.patch_persistent_volume(
                    volume.volume_name, {"spec": {"capacity": {"storage": wanted}}}, _request_timeout=_TIMEOUT
                )
            plane.volumes[volume.volume_name] = wanted

    def _forget_deleted_volumes(self, volume_ids: Collection[str]) -> None:
        """Remove the folders of volumes the platform no longer has: their files went with them."""
        if not self.volumes_root.is_dir():
            return
        for folder in self.volumes_root.iterdir():
            if folder.name not in volume_ids:
                shutil.rmtree(folder, ignore_errors=True)

    def _supervise(self, plane: _Plane, cluster_id: str) -> bool:
        """Start again each process that ended (see :mod:`.restarts`); ``False`` once one keeps ending."""
        control_plane = plane.control_plane
        now = time.monotonic()
        for name, code in control_plane.exited().items():
            if not plane.restarts.ended(name, control_plane.ran_for(name), now):
                message = (
                    f"cluster {cluster_id}: {name} exited with code {code}, "
                    f"{plane.restarts.in_a_row[name] + 1} times in a row; last log lines:\n"
                    f"{control_plane.log_tail(name)}"
                )
                _log.error("kubernetes twin: %s", message)
                self.errors.append(message)
                return False
            if not plane.restarts.due(name, now):
                continue
            _log.warning(
                "kubernetes twin: cluster %s: %s exited with code %s, starting it again; last log lines:\n%s",
                cluster_id,
                name,
                code,
                control_plane.log_tail(name, lines=5),
            )
            if control_plane.restart(name):
                plane.moved.add(name)
            plane.restarts.started(name)
        self._follow_moved_ports(plane)
        return True

    @staticmethod
    def _follow_moved_ports(plane: _Plane) -> None:
        """Point what names a moved port at the new one: JobSet's webhook configurations, the Nodes' kubelet
        endpoint. Kept pending until done, so an API server still starting only delays it to a later pass."""
        control_plane = plane.control_plane
        if "jobset" in plane.moved and plane.client is not None:
            jobset.point_webhooks(
                plane.client, control_plane.jobset_webhook_port, control_plane.files.ca_cert.read_bytes()
            )
            plane.moved.discard("jobset")
        if "kwok" in plane.moved and plane.core is not None:
            _advertise_kubelet_port(plane.core, control_plane.kubelet_port)
            plane.moved.discard("kwok")

    def _jobset_running(self, plane: _Plane, client: ApiClient) -> bool:
        """Install JobSet, start its manager once the CRD is served; whether its webhooks answer (or it is off).
        Each step is recorded, so a pass that fails half-way is resumed, not repeated."""
        if not self.options.jobset:
            if plane.jobset is None:
                jobset.uninstall_webhooks(client)
                plane.jobset = "off"
            return True
        if plane.jobset is None:
            control_plane = plane.control_plane
            jobset.install(
                client,
                self.binaries.jobset_crd,
                self.binaries.jobset_role,
                control_plane.jobset_webhook_port,
                control_plane.files.ca_cert.read_bytes(),
            )
            plane.jobset = "installed"
        if plane.jobset == "installed":
            if not jobset.crd_served(client):
                return False
            plane.control_plane.start_jobset()
            plane.jobset = "starting"
        # Running once a JobSet create gets through its webhooks, not once the manager says it is ready: a
        # first create (a user's, right after the cluster is ready) must not meet a 500 from its webhook.
        if (
            plane.jobset == "starting"
            and plane.control_plane.jobset_ready()
            and jobset.webhooks_answer(client)
        ):
            plane.jobset = "running"
        return plane.jobset == "running"

    def _sync_nodes(self, view: ClusterView, plane: _Plane, core: CoreV1Api) -> None:
        existing = {preemption.name_of(n)[0]: n for n in core.list_node(_request_timeout=_TIMEOUT).items}
        wanted = {n.name: n for n in view.nodes}
        for name in [n for n in existing if n not in wanted]:
            plane.draining.pop(name, None)
            preemption.remove_node(core, name)
        for name, node in wanted.items():
            if name not in existing:
                if node.preemption is None:
                    core.create_node(
                        cast(Any, node_manifest(node, self.options.nodes)), _request_timeout=_TIMEOUT
                    )
                continue
            if node.preemption is not None and not preemption.is_announced(existing[name]):
                preemption.announce(
                    core, name, node.preemption.at, node.preemption.message, self.options.preemption_reason
                )
                with self._lock:
                    mode = self._modes.pop((view.cluster_id, name), self.options.termination)
                plane.draining[name] = mode
        for name, mode in list(plane.draining.items()):
            draining = wanted.get(name)
            if draining is None or draining.preemption is None:
                plane.draining.pop(name)
                continue
            if self._drain(core, draining, self._nominal(draining.preemption.grace_seconds), mode):
                plane.draining.pop(name)
        # The platform reclaims a preempted node as soon as its pods have exited (at the latest at T+grace).
        for name, node in wanted.items():
            if (
                node.preemption is not None
                and name in existing
                and preemption.is_announced(existing[name])
                and name not in plane.draining
                and preemption.pods_exited(core, name)
            ):
                self._hooks.exited(view.cluster_id, name)

    @staticmethod
    def _play_repairs(plane: _Plane, core: CoreV1Api) -> None:
        """Play the remediations' transitions on the Nodes, in order, each once it went through (a failure
        leaves it and those after it to the next pass). After the Nodes were synced: a repair's node list
        (a replacement joined, the old Node gone) is the one its transition came with."""
        while plane.repairs:
            repairs.play(core, plane.repairs[0])
            plane.repairs.pop(0)

    def _nominal(self, real_seconds: float) -> float:
        """The platform's whole seconds in a real duration. A pod's grace period is in the pod's (emulated)
        seconds, as the local runtime reads it: the node's real time to live would shorten it by the speed."""
        return float(round(real_seconds / self._hooks.duration(1.0)))

    @staticmethod
    def _drain(core: CoreV1Api, node: NodeView, grace_seconds: float, mode: TerminationMode) -> bool:
        """Terminate the node's pods; ``True`` once none is left to terminate."""
        done = True
        for pod in preemption.pods_to_terminate(core, node.name, mode, KWOK_SIGNAL):
            done = preemption.terminate(core, pod, mode, grace_seconds, KWOK_SIGNAL) and done
        return done


def _advertise_kubelet_port(core: CoreV1Api, port: int) -> None:
    """Point every Node's kubelet endpoint (where the API server fetches pod logs) at kwok's new port. kwok
    sets it only when it initializes a node, so the nodes it had already would keep the old one."""
    patch = {"status": {"daemonEndpoints": {"kubeletEndpoint": {"Port": port}}}}
    for node in core.list_node(_request_timeout=_TIMEOUT).items:
        core.patch_node_status(preemption.name_of(node)[0], patch, _request_timeout=_TIMEOUT)


def _client(control_plane: ControlPlane) -> ApiClient:
    configuration = Configuration()
    configuration.host = control_plane.kube_api.server
    configuration.ssl_ca_cert = str(control_plane.files.ca_cert)
    configuration.api_key = {"authorization": control_plane.files.component_token("together-platform")}
    configuration.api_key_prefix = {"authorization": "Bearer"}
    return ApiClient(configuration)


def _bootstrap(client: ApiClient) -> None:
    """What a new cluster comes with, before kwok starts: the default StorageClass served by the fake
    provisioner, and kwok's ``Logs`` resource (established, so kwok can watch it from its start)."""
    for create in (
        lambda: StorageV1Api(client).create_storage_class(
            cast(Any, kwok_config.storage_class()), _request_timeout=_TIMEOUT
        ),
        lambda: ApiextensionsV1Api(client).create_custom_resource_definition(
            cast(Any, kwok_config.logs_crd()), _request_timeout=_TIMEOUT
        ),
    ):
        try:
            create()
        except ApiException as exc:
            if exc.status != 409:
                raise
    name = kwok_config.logs_crd()["metadata"]["name"]
    deadline = time.monotonic() + _TIMEOUT
    while time.monotonic() < deadline:
        crd = ApiextensionsV1Api(client).read_custom_resource_definition(name, _request_timeout=_TIMEOUT)
        conditions = crd.status.conditions if crd.status is not None else None
        if any(c.type == "Established" and c.status == "True" for c in conditions or []):
            return
        time.sleep(0.1)


def _default_service_account(core: CoreV1Api) -> bool:
    """Whether the controllers have created the ``default`` service account (pods need it)."""
    try:
        core.read_namespaced_service_account("default", "default", _request_timeout=_TIMEOUT)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True
