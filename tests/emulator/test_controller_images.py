"""The twin's kubelet adaptations for chart-installed controllers (pure parts): which address a Service port
leads to, how a manager's configuration is bound to its pod's own address, and its readiness probe."""

from __future__ import annotations

import http.server
import socket
import threading
from pathlib import Path

import yaml

from together_clusters.emulator.kubernetes import controller_images, probes, service_proxy
from together_clusters.emulator.kubernetes.service_proxy import LocalPod

CHART_CONFIG = """\
apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
leaderElection:
  leaderElect: true
internalCertManagement:
  enable: true
  webhookServiceName: jobset-webhook-service
"""


def test_the_managers_configuration_binds_its_own_address_and_finds_its_mounted_certificates() -> None:
    mounts = {"/tmp/k8s-webhook-server/serving-certs": Path("/pods/p/volumes/webhook-cert")}

    def rewrite(value: str) -> str:
        for mount, host in mounts.items():
            if value.startswith(mount):
                return str(host) + value[len(mount) :]
        return value

    adapted = yaml.safe_load(
        controller_images.adapt_config(CHART_CONFIG, "127.70.0.9", "jobset-system", rewrite)
    )
    assert adapted["webhook"] == {
        "host": "127.70.0.9",
        "port": 9443,
        "certDir": "/pods/p/volumes/webhook-cert",
    }
    assert adapted["metrics"]["bindAddress"] == "127.70.0.9:8443"
    assert adapted["health"]["healthProbeBindAddress"] == "127.70.0.9:8081"
    assert adapted["leaderElection"] == {"leaderElect": True, "resourceNamespace": "jobset-system"}
    assert adapted["internalCertManagement"]["webhookServiceName"] == "jobset-webhook-service"


def test_kueues_configuration_turns_off_the_visibility_server_and_keeps_the_users_gates() -> None:
    config = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nfeatureGates:\n  TopologyAwareScheduling: true\n"
    adapted = yaml.safe_load(
        controller_images.adapt_config(
            config, "127.70.0.9", "kueue-system", lambda v: v, controller_images.KUEUE.disabled_features
        )
    )
    assert adapted["featureGates"] == {"TopologyAwareScheduling": True, "VisibilityOnDemand": False}
    assert adapted["leaderElection"]["resourceNamespace"] == "kueue-system"
    assert controller_images.KUEUE.image("v0.17.0") == "registry.k8s.io/kueue/kueue:v0.17.0"


def test_a_disabled_metrics_server_stays_disabled() -> None:
    config = CHART_CONFIG + "metrics:\n  bindAddress: '0'\n"
    adapted = yaml.safe_load(controller_images.adapt_config(config, "127.70.0.9", "ns", lambda v: v))
    assert adapted["metrics"]["bindAddress"] == "0"


def test_a_webhook_service_leads_to_the_ready_pod_it_selects() -> None:
    service = {
        "metadata": {"name": "jobset-webhook-service", "namespace": "jobset-system"},
        "spec": {
            "clusterIP": "10.96.0.20",
            "selector": {"app": "jobset"},
            "ports": [{"port": 443, "targetPort": "webhook"}],
        },
    }
    ready = LocalPod(
        "jobset-system", {"app": "jobset", "x": "y"}, "10.246.0.1", "127.70.0.9", {"webhook": 9443}, True
    )
    elsewhere = LocalPod("other", {"app": "jobset"}, "10.246.0.2", "127.70.0.10", {"webhook": 9443}, True)
    table = service_proxy.routes([service], [elsewhere, ready])
    assert table[("10.96.0.20", 443)] == ("127.70.0.9", 9443)
    assert table[("10.246.0.1", 9443)] == ("127.70.0.9", 9443)
    not_ready = LocalPod(
        "jobset-system", {"app": "jobset"}, "10.246.0.1", "127.70.0.9", {"webhook": 9443}, False
    )
    assert ("10.96.0.20", 443) not in service_proxy.routes([service], [not_ready])


def test_the_egress_proxy_tunnels_a_service_address_to_the_pod(tmp_path: Path) -> None:
    server = http.server.HTTPServer(("127.0.0.1", 0), _Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    proxy = service_proxy.EgressProxy(f"@test-egress-{tmp_path.name}")
    try:
        proxy.set_routes({("10.96.0.20", 443): ("127.0.0.1", server.server_port)})
        with socket.socket(socket.AF_UNIX) as conn:
            conn.connect("\0" + proxy.socket_name.removeprefix("@"))
            conn.sendall(b"CONNECT 10.96.0.20:443 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert conn.recv(1024).startswith(b"HTTP/1.1 200")
            conn.sendall(b"GET / HTTP/1.0\r\n\r\n")
            reply = b""
            while chunk := conn.recv(4096):
                reply += chunk
        assert reply.endswith(b"hello")
    finally:
        proxy.close()
        server.shutdown()


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        self.send_response(200 if self.path == "/readyz" or self.path == "/" else 500)
        self.end_headers()
        self.wfile.write(b"hello")

    def log_message(self, *args: object) -> None:
        pass


def test_a_pod_is_ready_only_once_its_http_probe_passes() -> None:
    server = http.server.HTTPServer(("127.0.0.1", 0), _Hello)
    container = {
        "ports": [{"name": "health", "containerPort": server.server_port}],
        "readinessProbe": {"httpGet": {"port": "health", "path": "/readyz"}, "periodSeconds": 10},
    }
    readiness = probes.Readiness.of(container, "127.0.0.1", lambda s: s)
    assert readiness is not None
    assert not readiness.run(0.0) and not readiness.ready  # nothing listens yet
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert readiness.run(1.0) and readiness.ready
    finally:
        server.shutdown()
        server.server_close()
    # One failed probe is not enough to go unready (failureThreshold 3), three are.
    assert [readiness.run(t) for t in (2.0, 3.0, 4.0)] == [False, False, True] and not readiness.ready
