"""A container's readiness probe as a kubelet runs it, for the pods the local runtime runs.

A pod goes Ready only once its probe passes, so a Deployment's rollout, a Service's endpoints and Pulumi's
await of them mean what they mean on a node: a controller whose webhook certificates are not in place yet is
not Ready. ``httpGet`` (a status from 200 to 399) and ``tcpSocket`` (a connection) are run against the
pod's own address; other probes (``exec``, ``grpc``) are taken as passing. Delays and periods are the pod's
seconds, in the emulator's time (``duration``).
"""

from __future__ import annotations

import http.client
import socket
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import controller_images

Manifest = dict[str, Any]
_TIMEOUT_SECONDS = 1.0
_RETRY_WHILE_NOT_READY_SECONDS = 0.25
"""How soon a pod that is not Ready yet is probed again (a kubelet waits ``periodSeconds``; here that would
only slow every start down)."""


def _port(value: Any, ports: Mapping[str, int]) -> int:
    if isinstance(value, int):
        return value
    return ports[value] if value in ports else int(value)


@dataclass
class Readiness:
    """One container's readiness probe and its state."""

    check: Callable[[], bool]
    initial_delay: float
    period: float
    failure_threshold: int
    ready: bool = False
    failures: int = 0
    next_at: float = field(default_factory=time.monotonic)

    @classmethod
    def of(cls, container: Manifest, host: str, duration: Callable[[float], float]) -> Readiness | None:
        probe = container.get("readinessProbe")
        if not probe:
            return None
        ports = controller_images.ports(container)
        check: Callable[[], bool]
        if "httpGet" in probe:
            get = probe["httpGet"]
            port = _port(get["port"], ports)
            path = get.get("path") or "/"
            https = str(get.get("scheme", "HTTP")).upper() == "HTTPS"
            check = lambda: _http_ok(host, port, path, https)  # noqa: E731
        elif "tcpSocket" in probe:
            port = _port(probe["tcpSocket"]["port"], ports)
            check = lambda: _connects(host, port)  # noqa: E731
        else:
            return None
        return cls(
            check=check,
            initial_delay=duration(float(probe.get("initialDelaySeconds", 0))),
            period=duration(float(probe.get("periodSeconds", 10))),
            failure_threshold=int(probe.get("failureThreshold", 3)),
            next_at=time.monotonic() + duration(float(probe.get("initialDelaySeconds", 0))),
        )

    def restart(self, now: float) -> None:
        self.ready, self.failures, self.next_at = False, 0, now + self.initial_delay

    def due(self, now: float) -> bool:
        return now >= self.next_at

    def run(self, now: float) -> bool:
        """Probe once; whether readiness changed."""
        before = self.ready
        if self.check():
            self.failures = 0
            self.ready = True
        else:
            self.failures += 1
            if not self.ready or self.failures >= self.failure_threshold:
                self.ready = False
        self.next_at = now + (self.period if self.ready else min(self.period, _RETRY_WHILE_NOT_READY_SECONDS))
        return self.ready != before


def _http_ok(host: str, port: int, path: str, https: bool) -> bool:
    connection: http.client.HTTPConnection
    if https:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # as a kubelet: an HTTPS probe does not verify the certificate
        connection = http.client.HTTPSConnection(host, port, timeout=_TIMEOUT_SECONDS, context=context)
    else:
        connection = http.client.HTTPConnection(host, port, timeout=_TIMEOUT_SECONDS)
    try:
        connection.request("GET", path, headers={"User-Agent": "kube-probe/twin"})
        return 200 <= connection.getresponse().status < 400
    except (OSError, http.client.HTTPException):
        return False
    finally:
        connection.close()


def _connects(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=_TIMEOUT_SECONDS):
            return True
    except OSError:
        return False
