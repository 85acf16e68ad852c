"""The twin's kube-proxy for the API server: Service and pod addresses to the local pods behind them.

A cluster's API server calls a webhook of a Service (``clientConfig.service``, as a chart installs it) at
the Service's ClusterIP, and there is no kube-proxy and no pod network to carry that call. So the API
server is started with an egress selector (``--egress-selector-config-file``, :func:`egress_configuration`)
that sends its "cluster" traffic through an HTTP CONNECT proxy, :class:`EgressProxy`, on an abstract
Unix socket of its own (no file, no port to clash). The proxy routes each ``CONNECT ip:port``:

- a Service's ClusterIP and port, or a pod's IP and container port, of a pod the local runtime runs: to
  the loopback address that pod's process really listens on (:func:`routes` builds the table);
- anything else (a kwok node's kubelet server for logs, a webhook by URL): straight through.

Only the "cluster" egress goes this way; the API server reaches etcd and its own loopback directly.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

_log = logging.getLogger("together_clusters.emulator.kubernetes.service_proxy")
Address = tuple[str, int]
Manifest = dict[str, Any]
_HEADER_LIMIT = 16 * 1024
_BUFFER = 64 * 1024


@dataclass(frozen=True)
class LocalPod:
    """A locally run pod as the network sees it: its reported IP, the address its process binds, its ports."""

    namespace: str
    labels: Mapping[str, str]
    pod_ip: str
    host_ip: str
    """The loopback address the process listens on (its own, as a pod's network namespace is)."""
    ports: Mapping[str, int]
    """Container port numbers by name (unnamed ports under their number as a string)."""
    ready: bool


def egress_configuration(socket_name: str) -> str:
    """The API server's egress selector file: "cluster" traffic over HTTP CONNECT to ``socket_name``."""
    config = {
        "apiVersion": "apiserver.k8s.io/v1beta1",
        "kind": "EgressSelectorConfiguration",
        "egressSelections": [
            {
                "name": "cluster",
                "connection": {
                    "proxyProtocol": "HTTPConnect",
                    "transport": {"uds": {"udsName": socket_name}},
                },
            }
        ],
    }
    return yaml.safe_dump(config, sort_keys=False)


def _target_port(port: Mapping[str, Any], pod: LocalPod) -> int | None:
    target = port.get("targetPort", port.get("port"))
    if isinstance(target, int):
        return target
    if isinstance(target, str):
        return pod.ports.get(target) or (int(target) if target.isdigit() else None)
    return None


def routes(services: Iterable[Manifest], pods: Iterable[LocalPod]) -> dict[Address, Address]:
    """Where a connection to each Service port (ClusterIP) and pod port (pod IP) of a local pod goes.

    A Service selects the ready pods of its namespace whose labels match its selector, as the endpoints
    controller does; the first such pod serves it (these are single-replica controllers)."""
    pods = list(pods)
    table: dict[Address, Address] = {}
    for pod in pods:
        for number in pod.ports.values():
            table[(pod.pod_ip, number)] = (pod.host_ip, number)
    for service in services:
        meta, spec = service.get("metadata") or {}, service.get("spec") or {}
        selector = spec.get("selector") or {}
        cluster_ip = spec.get("clusterIP")
        if not selector or not cluster_ip or cluster_ip == "None":
            continue
        chosen = [
            p
            for p in pods
            if p.ready
            and p.namespace == meta.get("namespace")
            and all(p.labels.get(k) == v for k, v in selector.items())
        ]
        if not chosen:
            continue
        for port in spec.get("ports") or []:
            target = _target_port(port, chosen[0])
            if target is not None:
                table[(cluster_ip, int(port["port"]))] = (chosen[0].host_ip, target)
    return table


def _parse_connect(request: bytes) -> Address:
    """``CONNECT host:port HTTP/1.1`` -> (host, port); ``ValueError`` on anything else."""
    line = request.split(b"\r\n", 1)[0].decode("latin-1")
    method, target, _version = line.split(" ", 2)
    if method != "CONNECT":
        raise ValueError(f"not a CONNECT: {line!r}")
    host, _, port = target.rpartition(":")
    return host.strip("[]"), int(port)


class EgressProxy:
    """An HTTP CONNECT proxy on an abstract Unix socket, routing by :meth:`set_routes`' table."""

    def __init__(self, socket_name: str) -> None:
        self.socket_name = socket_name
        self._routes: dict[Address, Address] = {}
        self._lock = threading.Lock()
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # A leading "@" names an abstract socket to Go's net package; to Linux it is a leading NUL.
        self._server.bind("\0" + socket_name.removeprefix("@"))
        self._server.listen(64)
        self._closed = False
        self._thread = threading.Thread(target=self._accept, name=f"egress-{socket_name}", daemon=True)
        self._thread.start()

    def set_routes(self, table: Mapping[Address, Address]) -> None:
        with self._lock:
            self._routes = dict(table)

    def route(self, address: Address) -> Address:
        with self._lock:
            return self._routes.get(address, address)

    def close(self) -> None:
        self._closed = True
        try:
            self._server.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._server.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), name="egress-conn", daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        upstream: socket.socket | None = None
        try:
            request = b""
            while b"\r\n\r\n" not in request:
                chunk = client.recv(4096)
                if not chunk or len(request) > _HEADER_LIMIT:
                    return
                request += chunk
            head, _, rest = request.partition(b"\r\n\r\n")
            try:
                destination = self.route(_parse_connect(head))
            except ValueError:
                client.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
                return
            try:
                upstream = socket.create_connection(destination, timeout=10)
            except OSError as exc:
                _log.debug("egress to %s:%d failed: %s", *destination, exc)
                client.sendall(b"HTTP/1.1 503 Service Unavailable\r\n\r\n")
                return
            upstream.settimeout(None)
            # No Nagle, as Go's dialers (the API server's own, kube-proxy's) set: with it, the second piece of a
            # webhook call waited on the first one's ACK. Measured at rest on a twin with Kueue: 7.3 ms a webhook
            # call through this proxy without, 2.6 ms with (issue 40, part 4).
            upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            if rest:
                upstream.sendall(rest)
            back = threading.Thread(target=_pipe, args=(upstream, client), name="egress-pipe", daemon=True)
            back.start()
            _pipe(client, upstream)
            back.join()
        except OSError:
            pass
        finally:
            client.close()
            if upstream is not None:
                upstream.close()


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    """Copy until ``source`` ends, then end ``sink``'s writing half."""
    try:
        while chunk := source.recv(_BUFFER):
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        try:
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass
