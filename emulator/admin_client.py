"""A small client of the admin API (``/_emulator``), for tests and scripts; works against any emulator URL.

The faults a fault campaign needs, each one call:

- errors: :meth:`add_fault` with a ``status`` (429/5xx storms with ``count=`` and ``retry_after=``);
  ``after_commit=True`` makes the request take effect and then answers the error (a lost reply).
- :meth:`unreadable_reply`: the request takes effect; its 2xx reply is cut short, is not JSON, or has fields
  changed (an enum value from a later release, ``null`` where a value was expected).
- :meth:`drop_reply`: the request takes effect; the connection is closed without a reply.
- :meth:`reset_connection`: the connection is closed before the request takes effect.
- :meth:`slow_commit`: the request takes effect only after a delay (even if the client gave up).
- :meth:`slow_reply`: the request takes effect at once; its reply comes after a delay.
- :meth:`settings` ``list_lag_s=``: new clusters stay out of listings for a while (emulated seconds).
- :meth:`settings` ``unique_names=``: duplicate names refused with 409 (the default) or allowed.
- capacity pools: :meth:`set_capacity_pool` (a draw past a pool is refused), :meth:`capacity_pools`.
- fields a client sends that the API does not define (ignored, as the API does): :meth:`ignored_fields`.
- provisioning that ends badly: :meth:`add_provisioning_fault`; preemption: :meth:`preempt`.
- autoscaling's demand (GPU pods pending, nodes running a pod) without a twin: :meth:`set_demand`.
- node remediations: :meth:`raise_remediation` (an automated one with a linked Xid alert, as the health checks
  raise it), :meth:`remediation_outcome` (make one fail, or auto-resolve), :meth:`set_auto_remediation`,
  :meth:`remediations` (every one with the states it went through), :meth:`settings`
  ``remediation_timings=``.

Faults match requests by ``method`` and ``path`` prefix (default: every ``/v1/`` request) and apply to the
next ``count`` of them; the admin API itself and ``/healthz`` are never faulted.
"""

from __future__ import annotations

from typing import Any

import httpx


class AdminClient:
    """Steers an emulator over HTTP. Every method returns the decoded JSON reply and raises on an error status."""

    def __init__(self, base_url: str, timeout: float = 10.0) -> None:
        self._http = httpx.Client(base_url=base_url.rstrip("/") + "/_emulator", timeout=timeout)

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        reply = self._http.request(method, path, json=body)
        reply.raise_for_status()
        return reply.json()

    def preempt(
        self, cluster_id: str, count: int | None = None, node_ids: list[str] | None = None
    ) -> dict[str, Any]:
        """Preempt ``count`` preemptible nodes of a cluster (default 1, the oldest), or exactly ``node_ids``:
        cordoned now, deleted after the grace period."""
        body: dict[str, Any] = {"cluster_id": cluster_id}
        if count is not None:
            body["count"] = count
        if node_ids is not None:
            body["node_ids"] = node_ids
        return self._call("POST", "/preempt", body)

    def kubernetes_node(self, name: str) -> dict[str, str]:
        """The cluster (``cluster_id``) and platform node (``node_id``) behind the twin's Kubernetes Node
        ``name``: how the twin names Nodes is its own to know."""
        return dict(self._call("GET", f"/kubernetes/nodes/{name}"))

    def set_capacity(self, region: str, gpu_type: str, preemptible_gpus: int) -> dict[str, Any]:
        """Set the free preemptible GPUs of the pool of ``region`` and ``gpu_type``."""
        body = {"region": region, "gpu_type": gpu_type, "preemptible_gpus": preemptible_gpus}
        return self._call("PUT", "/capacity", body)

    def capacity(self) -> list[dict[str, Any]]:
        """Every preemptible pool: free, allocated and desired GPUs."""
        return list(self._call("GET", "/capacity")["pools"])

    def pool(self, region: str, gpu_type: str) -> dict[str, Any]:
        """The preemptible pool of ``region`` and ``gpu_type``."""
        return next(p for p in self.capacity() if p["region"] == region and p["gpu_type"] == gpu_type)

    def set_demand(
        self, cluster_id: str, pending_gpus: int, busy_node_ids: list[str] | None = None
    ) -> dict[str, Any]:
        """Report a cluster's demand as its scheduler would (a twin reports it itself): ``pending_gpus`` GPUs
        of pods waiting for lack of GPUs, and the nodes running a pod. A cluster created with ``auto_scale``
        adds standard nodes for it, and removes the added ones that stay idle (see
        :mod:`together_clusters.emulator.autoscaling`). Returns its autoscaling: the demand, the nodes added,
        when it looks next."""
        body: dict[str, Any] = {"cluster_id": cluster_id, "pending_gpus": pending_gpus}
        if busy_node_ids is not None:
            body["busy_node_ids"] = busy_node_ids
        return self._call("POST", "/autoscaling", body)

    def set_capacity_pool(self, pool_id: str, region: str, gpu_type: str, size_gpus: int) -> dict[str, Any]:
        """Define (or resize) the capacity pool ``pool_id``: clusters created with that ``capacity_pool_id`` draw
        their ``num_capacity_pool_gpus`` from its ``size_gpus``; a draw past it is refused (400)."""
        body = {"pool_id": pool_id, "region": region, "gpu_type": gpu_type, "size_gpus": size_gpus}
        return self._call("PUT", "/capacity-pools", body)

    def capacity_pools(self) -> list[dict[str, Any]]:
        """Every capacity pool: its size and region and GPU type, what is drawn and what is free."""
        return list(self._call("GET", "/capacity-pools")["capacity_pools"])

    def ignored_fields(self) -> list[dict[str, Any]]:
        """Every API request whose body had fields the API does not define, which the emulator ignored (as the
        real API's gateway does), oldest first: ``method``, ``route`` (the path template) and ``fields``
        (dotted paths, in the order sent). Requests without such fields are not listed."""
        return list(self._call("GET", "/ignored-fields")["requests"])

    def clear_ignored_fields(self) -> None:
        """Forget the requests listed by :meth:`ignored_fields` (:meth:`reset` forgets them too)."""
        self._call("DELETE", "/ignored-fields")

    def add_fault(self, status: int | None = None, count: int = 1, **options: Any) -> dict[str, Any]:
        """Fail (``status``) and/or delay (``delay_s=``) the next ``count`` matching requests.

        Options: ``method``, ``path`` (a prefix), ``retry_after``, ``message``, ``after_commit``, ``delay_s``,
        ``reply`` and ``patch`` (see :class:`together_clusters.emulator.faults.FaultSpec`).
        """
        return self._call("POST", "/faults", {"status": status, "count": count, **options})

    def unreadable_reply(
        self, mode: str = "truncated", count: int = 1, patch: dict[str, Any] | None = None, **match: Any
    ) -> dict[str, Any]:
        """The next ``count`` matching requests take effect; their reply keeps its 2xx status but is unreadable.

        ``mode``: ``"truncated"`` (the JSON cut in half), ``"invalid_json"`` (an HTML error page), or
        ``"patch"`` (``patch``'s fields merged into the JSON, e.g. ``{"status": "Hibernating"}``).
        """
        options = {"patch": patch} if patch is not None else {}
        return self.add_fault(None, count, reply=mode, **options, **match)

    def drop_reply(self, count: int = 1, **match: Any) -> dict[str, Any]:
        """The next ``count`` matching requests take effect, then the connection closes without a reply."""
        return self.add_fault(None, count, reply="drop", **match)

    def reset_connection(self, count: int = 1, **match: Any) -> dict[str, Any]:
        """Close the connection of the next ``count`` matching requests before they take effect."""
        return self.add_fault(None, count, reply="reset", **match)

    def slow_commit(self, delay_s: float, count: int = 1, **match: Any) -> dict[str, Any]:
        """Hold the next ``count`` matching requests ``delay_s`` real seconds, then let them take effect.

        A client that times out meanwhile still gets its change made: the outcome it saw is ambiguous.
        """
        return self.add_fault(None, count, delay_s=delay_s, **match)

    def slow_reply(self, delay_s: float, count: int = 1, **match: Any) -> dict[str, Any]:
        """The next ``count`` matching requests take effect at once; their reply waits ``delay_s`` real seconds."""
        return self.add_fault(None, count, delay_s=delay_s, after_commit=True, **match)

    def clear_faults(self) -> None:
        """Forget every pending HTTP and provisioning fault."""
        self._call("DELETE", "/faults")

    def add_provisioning_fault(self, outcome: str, count: int = 1) -> list[str]:
        """Make the next ``count`` creates end with ``outcome``; returns every pending outcome."""
        return list(
            self._call("POST", "/provisioning-faults", {"outcome": outcome, "count": count})["pending"]
        )

    def clock(self) -> dict[str, Any]:
        """The emulated time and the clock's speed."""
        return self._call("GET", "/clock")

    def advance(self, seconds: float) -> dict[str, Any]:
        """Move the emulated clock ``seconds`` ahead; due actions happen on the way."""
        return self._call("POST", "/clock", {"advance_s": seconds})

    def set_speed(self, speed: float) -> dict[str, Any]:
        """Emulated seconds per real second; 0 freezes the clock."""
        return self._call("POST", "/clock", {"speed": speed})

    def set_grace_seconds(self, seconds: float) -> dict[str, Any]:
        """How long a preempted node lives after being cordoned."""
        return self._call("POST", "/settings", {"grace_seconds": seconds})

    def settings(self, **changes: Any) -> dict[str, Any]:
        """The platform's settings, after applying ``changes`` (none: just read them).

        ``grace_seconds``: a preempted node's life after being cordoned. ``list_lag_s``: emulated seconds a
        new cluster stays out of ``GET /v1/compute/clusters`` (reading it by id works at once).
        ``unique_names``: ``True`` refuses a duplicate live name with 409, ``False`` allows duplicates.
        ``remediation_timings``: nominal seconds a remediation spends in ``pending_s``, ``quarantining_s``,
        ``quarantined_s`` and ``running_s`` (by mode, e.g. ``{"REMEDIATION_MODE_VM_ONLY": 60}``).
        """
        if not changes:
            return self._call("GET", "/settings")
        return self._call("POST", "/settings", changes)

    def raise_remediation(
        self, cluster_id: str, instance_id: str, mode: str | None = None, **options: Any
    ) -> dict[str, Any]:
        """Raise an automated remediation of an instance, as the platform's passive health checks do: trigger
        ``REMEDIATION_TRIGGER_AUTOMATED``, a linked alert, ``PENDING_APPROVAL`` (``PENDING`` on an instance with
        auto-remediation enabled). Returns the remediation as the API shows it.

        ``mode``: the full enum name (default ``REMEDIATION_MODE_HOST_AWARE``). Options: ``alert`` (``"xid"``,
        the default, or ``"slurm_node_unavailable"``), ``xid_code`` (default ``"79"``), ``xid_count``,
        ``reason``, ``outcome`` (``"fail"``: the repair fails once it runs).
        """
        body: dict[str, Any] = {"cluster_id": cluster_id, "instance_id": instance_id, **options}
        if mode is not None:
            body["mode"] = mode
        return self._call("POST", "/remediations", body)

    def remediation_outcome(
        self, remediation_id: str, outcome: str, error_message: str | None = None
    ) -> dict[str, Any]:
        """How a remediation ends: ``"auto_resolve"`` now (one in PENDING_APPROVAL or PENDING), or ``"fail"``
        (with ``error_message``) / ``"succeed"`` once it has run."""
        body: dict[str, Any] = {"outcome": outcome}
        if error_message is not None:
            body["error_message"] = error_message
        return self._call("POST", f"/remediations/{remediation_id}/outcome", body)

    def set_auto_remediation(
        self, cluster_id: str, enabled: bool, instance_ids: list[str] | None = None
    ) -> dict[str, Any]:
        """Turn auto-remediation on or off for some (default: all) instances of a cluster: with it on, the
        health checks' remediations start without waiting for approval."""
        body: dict[str, Any] = {"cluster_id": cluster_id, "enabled": enabled}
        if instance_ids is not None:
            body["instance_ids"] = instance_ids
        return self._call("POST", "/auto-remediation", body)

    def remediations(self) -> list[dict[str, Any]]:
        """Every remediation of every cluster, oldest first: the API's view plus ``node_id``,
        ``compute_class``, ``history`` (each state entered, with when) and the replacement instance."""
        return list(self._call("GET", "/remediations")["remediations"])

    def reset(self) -> None:
        """Forget every cluster, fault, pool change and setting; the clock keeps running."""
        self._call("POST", "/reset")

    def clusters(self) -> list[dict[str, Any]]:
        """Every cluster of every API key."""
        return list(self._call("GET", "/clusters")["clusters"])

    def volumes(self) -> list[dict[str, Any]]:
        """Every shared volume of every owner, with its cluster (``cluster_id``), region and lifecycle."""
        return list(self._call("GET", "/volumes")["volumes"])

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._http.close()
