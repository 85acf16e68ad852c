"""One cluster's control plane as processes: etcd, kube-apiserver, then kube-controller-manager,
kube-scheduler and the kwok controller, and the JobSet controller manager once its CRD is served, all from the
binaries scripts/install-kubernetes builds.

Everything lives in the cluster's data directory: credentials, etcd's data, the components' kubeconfigs,
kwok's configuration and one log per process. Start it again on the same directory and it carries on where it
stopped (same CA, tokens, port when free, and etcd's objects).

kwok also serves the kubelet API of every node on one loopback port (the nodes advertise it as their kubelet
endpoint, the API server reaches it by InternalIP and checks its certificate against the cluster's CA), so pod
logs of the pods the local runtime runs are read through the API as on a real cluster.

Processes are started with a parent-death signal, so they end with the emulator even when it is killed; and
:meth:`ControlPlane.stop` ends each by its own PID (TERM, a short wait, KILL): kube-apiserver alone takes about
a minute to exit on TERM.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from . import jobset, kubeconfig, kwok_config, pki, ports, service_proxy
from .binaries import Binaries
from .kubeconfig import KubeApi

_STOP_WAIT_S = 3.0
# Ports a process listens on that only the twin points others at (the JobSet webhook configurations, the
# nodes' kubelet endpoint): one taken meanwhile is replaced on a restart. etcd's and the API server's are
# written into every kubeconfig and etcd's membership, so they keep theirs.
_OWN_PORTS = {"kwok": ("kubelet",), "jobset": ("jobset_webhook", "jobset_health")}
_PR_SET_PDEATHSIG = 1
AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
"""
"""The audit policy of ``audit_log``: every request, its metadata only, once (when its response is sent)."""
AUDIT_LOG_FILE = "audit.log"
# Resolved here, in the parent: between fork and exec the child only makes this one call (no loading,
# no allocation that could meet a lock held by another thread at fork time).
_PRCTL: Callable[..., int] | None
try:
    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # not Linux: no parent-death signal, stop() still ends every process
    _PRCTL = None


def die_with_parent() -> None:
    """In the child, before exec: get SIGKILL when the thread that started us ends."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL)


class ControlPlane:
    """The processes of one cluster's control plane, in ``directory``.

    :meth:`prepare` writes the credentials and picks the ports (quick, no process); :meth:`start_api` starts
    etcd and kube-apiserver, :meth:`api_ready` says when the API answers, :meth:`start_controllers` then
    starts the rest. Call the ``start_*`` methods from a thread that lives as long as the processes should:
    the parent-death signal follows the starting thread.
    """

    def __init__(
        self,
        binaries: Binaries,
        directory: Path,
        cluster_name: str,
        admin_token: str,
        local_images: tuple[str, ...] = (),
    ) -> None:
        """``local_images``: the controller images the local runtime runs, which kwok must leave alone."""
        self.binaries = binaries
        self.local_images = local_images
        self.directory = directory
        self.cluster_name = cluster_name
        self.admin_token = admin_token
        self.files = pki.Files(directory)
        self._processes: dict[str, subprocess.Popen[bytes]] = {}
        self._ports: dict[str, int] = {}
        self._started_at: dict[str, float] = {}
        self.job_pod_failure_backoff: str | None = None
        self.audit_log = False

    # --- preparation ------------------------------------------------------------------------------

    def prepare(self) -> KubeApi:
        """Credentials (new, or the ones already in the directory) and ports; the API's address and CA."""
        if not self.files.token_file.exists():
            pki.create(self.directory, self.cluster_name, self.admin_token)
        pki.add_rbac_components(self.files)
        ports_file = self.directory / "ports.json"
        saved: dict[str, int] = json.loads(ports_file.read_text()) if ports_file.exists() else {}
        for name in ("apiserver", "etcd_client", "etcd_peer", "kubelet", "jobset_webhook", "jobset_health"):
            self._ports[name] = ports.keep_or_pick(saved.get(name))
        self._save_ports()
        return self.kube_api

    @property
    def egress_socket(self) -> str:
        """The abstract Unix socket of the API server's egress proxy (see :mod:`.service_proxy`): one per
        data directory, so a restarted emulator finds its cluster's again."""
        digest = hashlib.sha256(str(self.directory.resolve()).encode()).hexdigest()[:20]
        return f"@together-twin-egress-{digest}"

    @property
    def kube_api(self) -> KubeApi:
        return KubeApi(
            server=f"https://127.0.0.1:{self._ports['apiserver']}",
            certificate_authority_data=self.files.ca_data(),
        )

    def kubeconfig_for(self, component: str) -> Path:
        """A kubeconfig file for one of :data:`pki.COMPONENTS`."""
        path = self.directory / f"{component}.kubeconfig"
        if not path.exists():
            api = self.kube_api
            path.write_text(
                kubeconfig.render(
                    self.cluster_name,
                    api.server,
                    api.certificate_authority_data,
                    self.files.component_token(component),
                )
            )
            path.chmod(0o600)
        return path

    # --- processes --------------------------------------------------------------------------------

    def start_api(self) -> None:
        """Start etcd and kube-apiserver."""
        # A restart may find the API server's port taken meanwhile: the kubeconfigs follow the port.
        for stale in self.directory.glob("*.kubeconfig"):
            stale.unlink()
        self._start_etcd()
        self._start_apiserver()

    def start_controllers(self) -> None:
        """Start kube-controller-manager, kube-scheduler and kwok (the API must answer)."""
        self._start_controller_manager()
        self._start_scheduler()
        self._start_kwok()

    def restart(self, name: str) -> bool:
        """Start the ended process ``name`` again, on new ports for those of its own taken meanwhile;
        whether any moved (the JobSet manager's webhook configurations must then follow)."""
        moved = False
        for port_name in _OWN_PORTS.get(name, ()):
            port = ports.keep_or_pick(self._ports[port_name])
            moved = moved or port != self._ports[port_name]
            self._ports[port_name] = port
        if moved:
            self._save_ports()
        starters: dict[str, Callable[[], None]] = {
            "etcd": self._start_etcd,
            "kube-apiserver": self._start_apiserver,
            "kube-controller-manager": self._start_controller_manager,
            "kube-scheduler": self._start_scheduler,
            "kwok": self._start_kwok,
            "jobset": self.start_jobset,
        }
        starters[name]()
        return moved

    def _save_ports(self) -> None:
        # Whole or not at all: a restart of the emulator reads this file back.
        partial = self.directory / "ports.json.partial"
        partial.write_text(json.dumps(self._ports))
        partial.replace(self.directory / "ports.json")

    def _etcd_urls(self) -> tuple[str, str]:
        return (
            f"http://127.0.0.1:{self._ports['etcd_client']}",
            f"http://127.0.0.1:{self._ports['etcd_peer']}",
        )

    def _start_etcd(self) -> None:
        etcd_client, etcd_peer = self._etcd_urls()
        self._spawn(
            "etcd",
            [
                "--name=twin",
                f"--data-dir={self.directory / 'etcd'}",
                f"--listen-client-urls={etcd_client}",
                f"--advertise-client-urls={etcd_client}",
                f"--listen-peer-urls={etcd_peer}",
                f"--initial-advertise-peer-urls={etcd_peer}",
                f"--initial-cluster=twin={etcd_peer}",
                # Throwaway data on a shared disk: durability is not worth an fsync per write.
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )

    def _start_apiserver(self) -> None:
        files = self.files
        egress = self.directory / "egress-selector.yaml"
        egress.write_text(service_proxy.egress_configuration(self.egress_socket))
        self._spawn(
            "kube-apiserver",
            [
                f"--etcd-servers={self._etcd_urls()[0]}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={self._ports['apiserver']}",
                f"--tls-cert-file={files.serving_cert}",
                f"--tls-private-key-file={files.serving_key}",
                f"--client-ca-file={files.ca_cert}",
                f"--token-auth-file={files.token_file}",
                "--authorization-mode=RBAC",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={files.service_account_public_key}",
                f"--service-account-signing-key-file={files.service_account_key}",
                f"--service-cluster-ip-range={pki.SERVICE_CLUSTER_IP_RANGE}",
                # One API server on loopback: no Endpoints reconciling for the kubernetes Service.
                "--endpoint-reconciler-type=none",
                "--allow-privileged=true",
                # Pod logs: kwok's kubelet server, on loopback, presenting the serving certificate.
                "--kubelet-preferred-address-types=InternalIP",
                f"--kubelet-certificate-authority={files.ca_cert}",
                # Webhooks of a Service (and kwok's kubelet server) through the twin's proxy: no pod network.
                f"--egress-selector-config-file={egress}",
                "--profiling=false",
                "--v=0",
                *self._audit_flags(),
            ],
        )

    @property
    def audit_log_path(self) -> Path | None:
        """Where the API server writes its audit log, when ``audit_log`` asks for one."""
        return self.directory / AUDIT_LOG_FILE if self.audit_log else None

    def _audit_flags(self) -> list[str]:
        """The API server's audit log, when asked for: each request once its response is sent, who sent it
        (user and user agent), its verb and object, no bodies."""
        if self.audit_log_path is None:
            return []
        policy = self.directory / "audit-policy.yaml"
        policy.write_text(AUDIT_POLICY)
        return [
            f"--audit-policy-file={policy}",
            f"--audit-log-path={self.audit_log_path}",
            "--audit-log-format=json",
            "--audit-log-maxsize=0",
        ]

    def _start_controller_manager(self) -> None:
        env = {}
        if self.job_pod_failure_backoff:
            env["TWIN_JOB_POD_FAILURE_BACKOFF"] = self.job_pod_failure_backoff
        self._spawn(
            "kube-controller-manager",
            [
                f"--kubeconfig={self.kubeconfig_for('kube-controller-manager')}",
                "--bind-address=127.0.0.1",
                "--secure-port=0",
                "--leader-elect=false",
                f"--service-account-private-key-file={self.files.service_account_key}",
                f"--root-ca-file={self.files.ca_cert}",
                f"--service-cluster-ip-range={pki.SERVICE_CLUSTER_IP_RANGE}",
                "--profiling=false",
            ],
            env=env,
        )

    def _start_scheduler(self) -> None:
        self._spawn(
            "kube-scheduler",
            [
                f"--kubeconfig={self.kubeconfig_for('kube-scheduler')}",
                "--bind-address=127.0.0.1",
                "--secure-port=0",
                "--leader-elect=false",
                "--profiling=false",
            ],
        )

    def _start_kwok(self) -> None:
        config = self.directory / "kwok.yaml"
        config.write_text(kwok_config.configuration(self.local_images))
        self._spawn(
            "kwok",
            [
                f"--kubeconfig={self.kubeconfig_for('kwok')}",
                f"--config={config}",
                # The nodes' kubelet endpoint (pod logs): 127.0.0.1 is their InternalIP, this port their kubelet's.
                "--node-ip=127.0.0.1",
                f"--node-port={self._ports['kubelet']}",
                f"--server-address=127.0.0.1:{self._ports['kubelet']}",
                f"--tls-cert-file={self.files.serving_cert}",
                f"--tls-private-key-file={self.files.serving_key}",
                f"--enable-crds={kwok_config.LOGS_KIND}",
            ],
            program=self.binaries.kwok,
        )

    @property
    def kubelet_port(self) -> int:
        """Where kwok serves every node's kubelet API."""
        return self._ports["kubelet"]

    @property
    def jobset_webhook_port(self) -> int:
        return self._ports["jobset_webhook"]

    def start_jobset(self) -> None:
        """Start the JobSet controller manager (its CRD must be served; see :mod:`.jobset`)."""
        # The webhooks serve the API server's own certificate: same loopback address, signed by the CA that
        # the webhook configurations' caBundle names.
        cert_dir = self.directory / "jobset-webhook"
        cert_dir.mkdir(exist_ok=True)
        for source, target in ((self.files.serving_cert, "tls.crt"), (self.files.serving_key, "tls.key")):
            (cert_dir / target).write_bytes(source.read_bytes())
            (cert_dir / target).chmod(0o600)
        config = self.directory / "jobset.yaml"
        config.write_text(
            jobset.configuration(self._ports["jobset_webhook"], self._ports["jobset_health"], str(cert_dir))
        )
        self._spawn(
            "jobset",
            [
                f"--kubeconfig={self.kubeconfig_for('jobset-controller-manager')}",
                f"--config={config}",
                "--zap-devel=false",
                "--zap-log-level=info",
            ],
            program=self.binaries.jobset,
        )

    def jobset_ready(self) -> bool:
        """Whether the JobSet manager answers ``/readyz`` (its webhook server is serving)."""
        url = f"http://127.0.0.1:{self._ports['jobset_health']}/readyz"
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def _spawn(
        self, name: str, args: list[str], env: dict[str, str] | None = None, program: Path | None = None
    ) -> None:
        logs = self.directory / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        command = [str(program), *args] if program else [str(self.binaries.kubernetes), name, *args]
        self._started_at[name] = time.monotonic()
        with open(logs / f"{name}.log", "ab") as log:
            self._processes[name] = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.directory,
                env={**os.environ, **(env or {})},
                preexec_fn=die_with_parent,
                start_new_session=True,
            )

    def api_ready(self) -> bool:
        """Whether kube-apiserver answers ``/readyz`` (quick: for polling)."""
        context = ssl.create_default_context(cafile=str(self.files.ca_cert))
        request = urllib.request.Request(
            f"{self.kube_api.server}/readyz", headers={"Authorization": f"Bearer {self.admin_token}"}
        )
        try:
            with urllib.request.urlopen(request, timeout=2, context=context) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def set_answering(self, answering: bool) -> bool:
        """Freeze the API server (SIGSTOP) or let it go on (SIGCONT): frozen, it accepts connections and
        answers nothing, as a control plane behind a cut network does; its state is kept. Returns once every
        thread of the process has taken the signal (a stop reaches each thread only when it next runs, so a
        call right after the signal could still be served); ``False`` if the API server is not running."""
        process = self._processes.get("kube-apiserver")
        if process is None or process.poll() is not None:
            return False
        process.send_signal(signal.SIGCONT if answering else signal.SIGSTOP)
        deadline = time.monotonic() + _SIGNAL_TAKEN_S
        while _stopped_threads(process.pid) != (not answering):
            if time.monotonic() > deadline or process.poll() is not None:
                return False
            time.sleep(0.01)
        return True

    def exited(self) -> dict[str, int]:
        """The processes that have ended, with their exit codes."""
        return {name: code for name, p in self._processes.items() if (code := p.poll()) is not None}

    def ran_for(self, name: str) -> float:
        """Seconds since the process ``name`` was last started (for one just ended: about how long it ran)."""
        return time.monotonic() - self._started_at[name]

    def pids(self) -> list[int]:
        return [p.pid for p in self._processes.values()]

    def log_tail(self, name: str, lines: int = 20) -> str:
        """The last lines of one process's log, for error messages."""
        path = self.directory / "logs" / f"{name}.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self, wait: Callable[[float], None] = time.sleep) -> None:
        """End every process by its PID: TERM, up to a few seconds, then KILL; controllers before the API."""
        order = ["jobset", "kwok", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"]
        running = [self._processes[n] for n in order if n in self._processes]
        for process in running:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + _STOP_WAIT_S
        while any(p.poll() is None for p in running) and time.monotonic() < deadline:
            wait(0.05)
        for process in running:
            if process.poll() is None:
                process.kill()
            process.wait()
        self._processes.clear()


_SIGNAL_TAKEN_S = 10.0
"""Seconds for every thread of a process to take a SIGSTOP or SIGCONT (a thread in a system call takes it on
the way out)."""


def _stopped_threads(pid: int) -> bool | None:
    """``True`` if every thread of ``pid`` is stopped, ``False`` if none is, ``None`` while some are (or the
    process is gone)."""
    try:
        states = {
            (task / "stat").read_text().rsplit(")", 1)[1].split()[0]
            for task in Path(f"/proc/{pid}/task").iterdir()
        }
    except (OSError, IndexError):
        return None
    stopped = states & {"T", "t"}
    if stopped == states:
        return True
    return False if not stopped else None
