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
        return self._call("POST", "/preempt", {"cluster_id": cluster_id, "count": count})

    def set_capacity(self, region: str, gpu_type: str, preemptible_gpus: int) -> dict[str, Any]:
        body = {"region": region, "gpu_type": gpu_type, "preemptible_gpus": preemptible_gpus}
        return self._call("PUT", "/capacity", body)

    def capacity(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "/capacity")["pools"])

    def pool(self, region: str, gpu_type: str) -> dict[str, Any]:
        return next(p for p in self.capacity() if p["region"] == region and p["gpu_type"] == gpu_type)

    def add_fault(self, status: int | None = None, count: int = 1, **options: Any) -> dict[str, Any]:
        return self._call("POST", "/faults", {"status": status, "count": count, **options})

    def clear_faults(self) -> None:
        self._call("DELETE", "/faults")

    def add_provisioning_fault(self, outcome: str, count: int = 1) -> list[str]:
        return list(
            self._call("POST", "/provisioning-faults", {"outcome": outcome, "count": count})["pending"]
        )

    def clock(self) -> dict[str, Any]:
        return self._call("GET", "/clock")

    def advance(self, seconds: float) -> dict[str, Any]:
        return self._call("POST", "/clock", {"advance_s": seconds})

    def set_speed(self, speed: float) -> dict[str, Any]:
        return self._call("POST", "/clock", {"speed": speed})

    def set_grace_seconds(self, seconds: float) -> dict[str, Any]:
        return self._call("POST", "/settings", {"grace_seconds": seconds})

    def reset(self) -> None:
        self._call("POST", "/reset")

    def clusters(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "/clusters")["clusters"])

    def close(self) -> None:
        self._http.close()
