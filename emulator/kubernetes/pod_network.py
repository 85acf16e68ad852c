"""Addresses for the pods the local runtime runs as controllers: a pod IP to report, a loopback address to bind.

On a node each pod has a network namespace of its own, so every JobSet (or Kueue) manager binds its usual
ports (9443, 8081, 8443) without clashing. Here every process shares the host's network, so each such pod
gets an address of its own in 127.0.0.0/8 (all of it is loopback on Linux) where its ports are free, and
binds there (see :mod:`.controller_images`). The API reports a pod IP outside loopback (Endpoints refuse a
loopback address), from :data:`POD_RANGE`; the API server's egress proxy (:mod:`.service_proxy`) maps it
and the Services in front of it to the loopback address.
"""

from __future__ import annotations

import ipaddress
import itertools
import random
import socket
import threading
from collections.abc import Iterable

from .local_pods import PodNetwork

POD_RANGE = ipaddress.ip_network("10.246.0.0/16")
"""Pod IPs of locally run controllers (kwok gives simulated pods 10.244.0.0/16)."""
HOST_RANGE = ipaddress.ip_network("127.64.0.0/10")
"""Loopback addresses the controllers bind to (127.0.0.1 stays the control plane's)."""

_taken: set[str] = set()
"""Loopback addresses in use by this emulator's pods (of every cluster)."""
_lock = threading.Lock()


def _free(host: str, ports: Iterable[int]) -> bool:
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((host, port))
            except OSError:
                return False
    return True


def _host_for(ports: Iterable[int]) -> str:
    ports = list(ports)
    size = HOST_RANGE.num_addresses - 2
    # From a random place: another emulator on this machine (a test beside a user's) starts elsewhere.
    start = random.randrange(size)
    with _lock:
        for offset in range(size):
            host = str(HOST_RANGE.network_address + 1 + (start + offset) % size)
            if host not in _taken and _free(host, ports):
                _taken.add(host)
                return host
    raise RuntimeError(f"no loopback address in {HOST_RANGE} has ports {ports} free")


def release(network: PodNetwork) -> None:
    """Give a pod's loopback address back (its process has ended)."""
    with _lock:
        _taken.discard(network.host_ip)


class PodIPs:
    """One cluster's pod IPs for its locally run controllers."""

    def __init__(self) -> None:
        self._next = itertools.count(1)

    def allocate(self, ports: Iterable[int]) -> PodNetwork:
        pod_ip = str(POD_RANGE.network_address + 1 + (next(self._next) - 1) % (POD_RANGE.num_addresses - 2))
        return PodNetwork(pod_ip=pod_ip, host_ip=_host_for(ports))
