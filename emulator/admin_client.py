"""A small client of the admin API (``/_emulator``), for tests and scripts; works against any emulator URL."""

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

    def preempt(self, cluster_id: str, count: int = 1) -> dict[str, Any]:
        """Preempt ``count`` preemptible nodes of a cluster: cordoned now, deleted after the grace period."""
        return self._call("POST", "/preempt", {"cluster_id": cluster_id, "count": count})

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

    def add_fault(self, status: int | None = None, count: int = 1, **options: Any) -> dict[str, Any]:
        """Fail (``status``) and/or delay (``delay_s=``) the next ``count`` matching requests."""
        return self._call("POST", "/faults", {"status": status, "count": count, **options})

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

    def reset(self) -> None:
        """Forget every cluster, fault and pool change; the clock keeps running."""
        self._call("POST", "/reset")

    def clusters(self) -> list[dict[str, Any]]:
        """Every cluster of every API key."""
        return list(self._call("GET", "/clusters")["clusters"])

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._http.close()
