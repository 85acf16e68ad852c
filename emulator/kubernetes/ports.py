"""Loopback ports for control plane processes, picked now and listened on seconds later.

A port the kernel hands out for ``bind(("127.0.0.1", 0))`` comes from the ephemeral range, the same range
every outgoing connection takes its local port from. Between picking it and the process binding it (a
JobSet manager starts seconds after its cluster is created), any client connection on the machine may take
it; CI met exactly that. So ports are picked below the ephemeral range, where the kernel never assigns one on
its own, and never twice by this process; a port still taken by someone else is only found at bind time,
which the twin survives by starting the process again on another (see ``Twin._supervise``).
"""

from __future__ import annotations

import random
import socket
import threading
from pathlib import Path

_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_DEFAULT_EPHEMERAL_START = 32768
_LOWEST = 20000
_ATTEMPTS = 200

_handed_out: set[int] = set()
_lock = threading.Lock()


def _ephemeral_start() -> int:
    try:
        return int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return _DEFAULT_EPHEMERAL_START


def is_free(port: int) -> bool:
    """Whether nobody listens on (or holds) this loopback TCP port right now."""
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def pick() -> int:
    """A free loopback port outside the ephemeral range, not handed out before by this process."""
    start = _ephemeral_start()
    candidates = range(_LOWEST, start) if start - _LOWEST >= 1000 else range(1024, start)
    with _lock:
        for _ in range(_ATTEMPTS):
            port = random.choice(candidates)
            if port not in _handed_out and is_free(port):
                _handed_out.add(port)
                return port
    # A machine whose ephemeral range leaves no room below it: take one from the kernel.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def keep_or_pick(port: int | None) -> int:
    """``port`` while it is free (a restarted cluster keeps its address), else a new one."""
    if port is not None and is_free(port):
        return port
    return pick()
