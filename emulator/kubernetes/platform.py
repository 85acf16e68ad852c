"""The emulated platform with a Kubernetes twin behind every cluster.

:class:`TwinnedPlatform` is the plain :class:`~together_clusters.emulator.state.Platform` (the compute API and
its state machine are unchanged) plus three hooks: a new cluster gets credentials and an API address at once,
so its ``kube_config`` is final from the first reply; the twin reads a view of every cluster each pass (with
the states its remediations entered since the last one, which the twin plays on the Nodes: :mod:`.repairs`);
a preemption may name how its pods are terminated.
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict

from together_clusters.platform import TerminationMode

from ..errors import conflict, not_found
from ..lifecycle import failed_at
from ..records import ClusterRecord
from ..remediations import RemediationTransition
from ..state import Platform
from . import binaries as binaries_module
from .binaries import Binaries
from .demand import Demand
from .kubeconfig import KubeApi
from .nodes import ClusterView, cluster_view, node_name
from .options import TwinOptions
from .repairs import RELEVANT_STATES
from .twin import Twin, TwinHooks


def data_root_for(state_path: str | Path | None) -> Path | None:
    """Where control planes keep their data beside a state file (``None``: a temporary folder)."""
    if state_path is None:
        return None
    path = Path(state_path)
    return path.parent / f"{path.name}.kubernetes"


class TwinnedPlatform(Platform):
    """A :class:`Platform` whose clusters each run a real control plane with kwok nodes.

    ``data_root`` keeps the control planes' data (credentials, etcd) across restarts, beside the state file;
    without it a temporary folder is used and removed on :meth:`close`.
    """

    def __init__(
        self,
        *,
        options: TwinOptions | None = None,
        data_root: Path | None = None,
        binaries: Binaries | None = None,
        **platform_args: Any,
    ) -> None:
        options = options or TwinOptions()
        found = binaries or binaries_module.require(jobset=options.jobset)
        root = data_root or Path(tempfile.mkdtemp(prefix="together-twin-"))
        # The twin exists before the platform loads its state: a restored cluster gets its control plane back.
        # Remediation transitions not yet handed to the twin, by cluster (see twin_view).
        self._repairs: dict[str, list[RemediationTransition]] = {}
        hooks = TwinHooks(
            view=self.twin_view,
            volume_ids=self.twin_volume_ids,
            attach=self._attach_kube_api,
            serving=self._kube_serving,
            failed=self._kube_failed,
            exited=self._pods_exited,
            demand=self._demand,
            duration=lambda seconds: self.clock.duration(seconds),
        )
        self.twin = Twin(found, root, options, hooks, keep_data=data_root is not None)
        super().__init__(**platform_args)
        self.twin.start()

    def set_api_answering(self, cluster_id: str, answering: bool) -> dict[str, Any]:
        """Make a cluster's Kubernetes API server stop answering, or answer again (see
        :meth:`~.twin.Twin.set_answering`); 404 for a cluster without a control plane, 409 while its API
        server is not running (a fault test must not go on believing it froze one)."""
        taken = self.twin.set_answering(cluster_id, answering)
        if taken is None:
            raise not_found(f"cluster {cluster_id} has no Kubernetes control plane")
        if not taken:
            raise conflict(
                f"cluster {cluster_id}'s Kubernetes API server is not running (ended or starting): retry once"
                " the cluster is ready"
            )
        return {"cluster_id": cluster_id, "answering": answering}

    def _cluster_added(self, record: ClusterRecord) -> None:
        record.kube_api = self.twin.prepare(record.cluster_id, record.cluster_name, record.kube_token)
        record.kube_serving = False

    def twin_view(self) -> list[ClusterView]:
        """Every cluster as its twin should be now (also moves the platform's timers along).

        Not persisted on every pass: what the timers do follows from the saved state and the clock, and the
        next operation (or the final flush) saves it.
        """
        with self._lock:
            now = self.clock.now()
            self._sim.advance_to(now)
            # Handed over with the view they are consistent with: a repair's node list and its transition.
            transitions, self._repairs = self._repairs, {}
            return [
                replace(
                    cluster_view(c, now, self._volumes.of_cluster(c.cluster_id)),
                    remediations=tuple(transitions.get(c.cluster_id, ())),
                )
                for c in self._sim.ordered()
            ]

    def _remediation_entered(self, transition: RemediationTransition) -> None:
        """Queue a state a remediation entered that changes a Node, for the twin's next view (called under
        the lock; the twin acts on it outside, see :mod:`.repairs`)."""
        if transition.state in RELEVANT_STATES:
            self._repairs.setdefault(transition.cluster_id, []).append(transition)

    def twin_volume_ids(self) -> set[str]:
        """The id of every shared volume (the twin removes the folders of the others: their data is gone)."""
        with self._lock:
            self._volumes.settle(self._sim.clusters)
            return set(self._volumes.records)

    def _attach_kube_api(self, cluster_id: str, api: KubeApi) -> None:
        with self._op():
            record = self._sim.clusters.get(cluster_id)
            if record is not None:
                record.kube_api = api

    def _cluster_loaded(self, record: ClusterRecord) -> None:
        """Kept as saved: a cluster still starting shows Ready once the twin says its control plane serves; one
        already Ready stays so while its control plane restarts (as a real cluster's status would)."""

    def _kube_serving(self, cluster_id: str) -> None:
        with self._op():
            record = self._sim.clusters.get(cluster_id)
            if record is not None:
                record.kube_serving = True

    def _kube_failed(self, cluster_id: str) -> None:
        """The twin gave up on the cluster's control plane. One not yet Ready never will be: its provisioning
        fails now, as acceptance tests fail on a cluster whose Kubernetes does not serve (the twin's status
        has the reason). One already Ready stays so, as a real cluster's status would while its control
        plane is down."""
        with self._op() as now:
            record = self._sim.clusters.get(cluster_id)
            if record is None or record.kube_serving or record.deleting:
                return
            record.schedule = failed_at(record.schedule, now)

    def _demand(self, cluster_id: str, demand: Demand) -> None:
        """An autoscaling cluster's demand, as its pods ask (see :mod:`.demand`): the platform scales on it.
        Not persisted on every pass (the twin reports it again after a restart); the next operation saves it."""
        with self._lock:
            record = self._sim.clusters.get(cluster_id)
            if record is None:
                return
            now = self.clock.now()
            self._sim.advance_to(now)
            busy = [n.node_id for n in record.nodes if node_name(n.node_id) in demand.busy_nodes]
            self._sim.report_demand(record, demand.pending_gpus, busy, now)

    def _pods_exited(self, cluster_id: str, name: str) -> None:
        """Every pod of the preempted Node ``name`` has exited: the platform reclaims the node now."""
        with self._op() as now:
            record = self._sim.clusters.get(cluster_id)
            if record is None:
                return
            for node in record.nodes:
                if node_name(node.node_id) == name:
                    self._sim.reclaim_now(record, node.node_id, now)

    def preempt(
        self,
        cluster_id: str,
        count: int | None = None,
        node_ids: list[str] | None = None,
        termination: TerminationMode | None = None,
    ) -> dict[str, Any]:
        """Preempt as the platform does; ``termination`` overrides the twin's default mode for these nodes."""
        with self._lock:
            result = super().preempt(cluster_id, count, node_ids)
            if termination is not None:
                names = [node_name(n) for n in result["preempted"]]
                self.twin.set_termination(cluster_id, names, termination)
        result["termination"] = (termination or self.twin.options.termination).value
        result["preempted_nodes"] = [node_name(n) for n in result["preempted"]]
        return result

    def node_named(self, name: str) -> dict[str, str]:
        """The cluster and platform node id behind the Kubernetes Node ``name`` (the twin names Nodes after
        node ids: a client of the twin asks here rather than knowing how)."""
        for cluster in self.all_clusters():
            for node in cluster.get("gpu_worker_nodes") or []:
                if node_name(node["node_id"]) == name:
                    return {"name": name, "cluster_id": cluster["cluster_id"], "node_id": node["node_id"]}
        raise not_found(f"node {name} belongs to no cluster of the emulator", "name")

    def close(self) -> None:
        """Stop every control plane (their data stays beside a state file)."""
        self.twin.stop()
        super().close()

    def twin_admin_router(self) -> APIRouter:
        """Admin routes of the twin under ``/_emulator/kubernetes``."""
        return _router(self)


class _PreemptBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cluster_id: str
    count: int | None = None
    node_ids: list[str] | None = None
    termination: TerminationMode | None = None


class _AnsweringBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    answering: bool


def _router(platform: TwinnedPlatform) -> APIRouter:
    r = APIRouter(prefix="/_emulator/kubernetes", include_in_schema=False)

    @r.get("")
    def status() -> dict[str, Any]:
        twin = platform.twin
        return {
            "termination": twin.options.termination.value,
            "preemptible_taint": twin.options.nodes.preemptible_taint,
            "jobset": twin.options.jobset,
            "control_planes": twin.status(),
            "errors": twin.errors,
        }

    @r.post("/preempt")
    def preempt(body: _PreemptBody) -> dict[str, Any]:
        return platform.preempt(body.cluster_id, body.count, body.node_ids, body.termination)

    @r.post("/clusters/{cluster_id}/api-server")
    def api_server(cluster_id: str, body: _AnsweringBody) -> dict[str, Any]:
        return platform.set_api_answering(cluster_id, body.answering)

    @r.get("/nodes/{name}")
    def node(name: str) -> dict[str, str]:
        return platform.node_named(name)

    return r
