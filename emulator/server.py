"""Run the emulator in a background thread of this process (for tests and embedding)."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import uvicorn

from together_clusters._extras import requires_extra

from .admin_client import AdminClient
from .app import asgi_app
from .state import Platform
from .store import Store

if TYPE_CHECKING:
    from .kubernetes.options import TwinOptions


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening socket; port 0 picks a free port, which is then known before serving starts."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # Named as TCP, asyncio sets TCP_NODELAY on every accepted connection (it checks the protocol):
    # without it each small reply waits for the client's delayed ACK, about 40 ms.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def make_platform(kubernetes: bool | TwinOptions | None = False, **platform_args: Any) -> Platform:
    """The lightweight platform, or with ``kubernetes`` one with a Kubernetes twin behind every cluster."""
    if not kubernetes:
        return Platform(**platform_args)
    # Imported here: the lightweight emulator never loads the Kubernetes client.
    from .kubernetes.options import TwinOptions

    with requires_extra("twin", "the emulator's Kubernetes twin (--kubernetes)"):
        from .kubernetes.platform import TwinnedPlatform, data_root_for

    store = platform_args.get("store")
    return TwinnedPlatform(
        options=kubernetes if isinstance(kubernetes, TwinOptions) else None,
        data_root=data_root_for(store.path if store is not None else None),
        **platform_args,
    )


def base_url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def uvicorn_config(platform: Platform) -> uvicorn.Config:
    # A request held by an injected delay must not hold up a shutdown: it is cancelled after a moment.
    return uvicorn.Config(
        asgi_app(platform),
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=2,
    )


class RunningEmulator:
    """An emulator serving in a background thread. Stop it with ``stop()`` or use it as a context manager."""

    def __init__(self, platform: Platform, sock: socket.socket, store: Store | None) -> None:
        self.platform = platform
        self.base_url = base_url_of(sock)
        self._sock = sock
        self._store = store
        self._server = uvicorn.Server(uvicorn_config(platform))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True)
        self._admin: AdminClient | None = None

    @property
    def admin(self) -> AdminClient:
        """A client of this emulator's admin API."""
        if self._admin is None:
            self._admin = AdminClient(self.base_url)
        return self._admin

    def _start(self, timeout: float = 15.0) -> None:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the emulator did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        """Stop serving, persist the clock and close the state file."""
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()
        if self._admin is not None:
            self._admin.close()
        self.platform.close()
        self.platform.flush()
        if self._store is not None:
            self._store.close()

    def __enter__(self) -> RunningEmulator:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def start_emulator(
    port: int = 0,
    host: str = "127.0.0.1",
    state_path: str | Path | None = None,
    speed: float | None = None,
    grace_seconds: float | None = None,
    extra_fields: bool = False,
    default_driver: bool = False,
    kubernetes: bool | TwinOptions = False,
) -> RunningEmulator:
    """Start an emulator in a background thread and return once it accepts connections.

    ``speed`` is emulated seconds per real second (0 freezes the clock; advance it with the admin API);
    ``None`` means the speed saved in ``state_path``, else 60. ``grace_seconds`` (default 300) is how long a
    preempted node lives after it is cordoned. ``extra_fields`` adds fields the official SDK does not define
    (each GPU node's ``compute_class`` and ``labels``); by default replies have exactly the SDK's shapes.
    ``default_driver`` accepts a create without a driver selector (the real API refuses it) and picks the
    region's newest driver. ``kubernetes`` gives every cluster a real control plane (the twin, with these
    options when given; it needs scripts/install-kubernetes); off by default.
    """
    store = Store(state_path) if state_path is not None else None
    platform = make_platform(
        kubernetes,
        store=store,
        speed=speed,
        grace_seconds=grace_seconds,
        extra_fields=extra_fields,
        default_driver=default_driver,
    )
    emulator = RunningEmulator(platform, bind_socket(host, port), store)
    emulator._start()
    return emulator
