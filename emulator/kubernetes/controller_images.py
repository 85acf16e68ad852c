"""The controller images the twin's kubelet runs for real: the image, the local binary, what to adapt (pure).

A bare twin cluster has nothing installed; a user's ``pulumi up`` installs controllers from their official
charts (``ClusterControllers``), whose pods name release images. The twin cannot pull images, but
scripts/install-kubernetes builds the same programs from the same pinned Go modules. A pod whose container
image is one of :func:`known` (repository and the tag of the version built) is run by the local runtime as
that binary, with what a kubelet gives a pod (:mod:`.local_pods`), and these adaptations, which stand in
for the pod's own network and mount namespaces:

- **the program**: the image's entrypoint (``/manager``, ``/bin/descheduler``) is the binary;
- **the API server**: ``KUBECONFIG`` names a kubeconfig with the pod's service account token and CA files
  (the in-cluster files live at a fixed path, ``/var/run/secrets/kubernetes.io/serviceaccount``, that the
  process cannot have of its own), and ``KUBERNETES_SERVICE_HOST``/``PORT`` are the API server's; a program
  that reads no ``KUBECONFIG`` (the descheduler) is given it by its flag
  (:attr:`ControllerImage.kubeconfig_flag`);
- **bind addresses**: the manager's configuration file (``--config``; a controller-runtime component config:
  ``webhook``, ``metrics``, ``health``) binds to the pod's own loopback address instead of all addresses,
  and its webhook certificate folder is the host folder of the mounted Secret; a program configured by flags
  instead (the descheduler: metrics and health on one secure port) gets its bind address flag
  (:attr:`ControllerImage.bind_address_flag`) set to that address;
- **the pod's namespace**, which a manager reads from the in-cluster files for its leader election, is
  written into the configuration (``leaderElection.resourceNamespace``) unless it names one;
- **fixed paths**: JobSet's certificate rotator waits for ``tls.crt`` to exist in the one folder it knows,
  ``/tmp/k8s-webhook-server/serving-certs`` (:attr:`ControllerImage.waits_for_certificate_in`); once the pod's
  own certificate is in its mounted Secret, a copy is put there (only its existence is read; the webhook
  server serves the pod's own files). The namespace JobSet's rotator reads from the in-cluster files falls
  back to ``jobset-system``, where ``ClusterControllers`` installs it. Kueue's rotator takes its folder from
  the configuration (``webhook.certDir``, rewritten above) and waits there until the kubelet's refresh of the
  mounted Secret brings the files it wrote into the Secret;
- **features the twin turns off** (:attr:`ControllerImage.disabled_features`, written into the configuration's
  ``featureGates``): Kueue's on-demand visibility API server keeps self-signed certificates in a fixed folder,
  ``/visibility`` (its chart mounts an emptyDir there), and binds every address: on the host it would share
  one folder and one port with every other cluster's Kueue. Nothing the components do reads that API.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from together_clusters.platform import charts

Manifest = dict[str, Any]
CONFIG_FLAG = "--config="
SERVICE_ACCOUNT_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
# controller-runtime's defaults where a component config leaves them out.
_DEFAULT_CERT_DIR = "/tmp/k8s-webhook-server/serving-certs"
_DEFAULT_WEBHOOK_PORT = 9443
_DEFAULT_METRICS = ":8443"
_DEFAULT_HEALTH = ":8081"


@dataclass(frozen=True)
class ControllerImage:
    """One controller image the twin runs as a local binary."""

    repository: str
    binary: str
    """The file name in the twin's binaries folder."""
    entrypoint: str
    """The image's program, which the binary replaces."""
    waits_for_certificate_in: str | None = None
    """A folder of the container the program checks for ``tls.crt`` by a path it does not take from its
    configuration (JobSet's rotator)."""
    disabled_features: tuple[str, ...] = ()
    """Feature gates the twin turns off in the configuration, for a feature a host process cannot run."""
    kubeconfig_flag: str | None = None
    """The flag (``--client-connection-kubeconfig=``) that gives the kubeconfig to a program that does not
    read ``KUBECONFIG`` (it would look for the in-cluster files at their fixed path)."""
    bind_address_flag: str | None = None
    """The flag (``--bind-address=``) of the address a program serves its metrics and health on, when no
    configuration file says it (it would bind every address, and clash with the next cluster's)."""

    def image(self, tag: str) -> str:
        return f"{self.repository}:{tag}"


JOBSET = ControllerImage(
    repository=charts.JOBSET.image_repository,
    binary="jobset",
    entrypoint="/manager",
    waits_for_certificate_in=_DEFAULT_CERT_DIR,
)
DESCHEDULER = ControllerImage(
    repository=charts.DESCHEDULER.image_repository,
    binary="descheduler",
    entrypoint="/bin/descheduler",
    kubeconfig_flag="--client-connection-kubeconfig=",
    bind_address_flag="--bind-address=",
)
"""Its policy is a ConfigMap file (``--policy-config-file=/policy-dir/policy.yaml``), rewritten to the host
file like every mounted path; no component config."""


KUEUE = ControllerImage(
    repository=charts.KUEUE.image_repository,
    binary="kueue",
    entrypoint="/manager",
    disabled_features=("VisibilityOnDemand",),
)
IMAGES = (JOBSET, KUEUE, DESCHEDULER)


def known(bin_dir: Path, versions: Mapping[str, str]) -> dict[str, tuple[ControllerImage, Path]]:
    """Image reference -> (profile, binary) for each profile whose binary is built, at the built version."""
    found = {}
    for profile in IMAGES:
        binary = bin_dir / profile.binary
        version = versions.get(profile.binary)
        if version and binary.is_file():
            found[profile.image(version)] = (profile, binary)
    return found


def bind_on(address: str, host: str) -> str:
    """A bind address (``:8443``, ``0.0.0.0:8443``) on ``host`` instead; ``0`` (off) stays off."""
    if address in ("", "0"):
        return address
    _, _, port = address.rpartition(":")
    return f"{host}:{port}"


def adapt_config(
    text: str,
    host: str,
    namespace: str,
    rewrite: Callable[[str], str],
    disabled_features: tuple[str, ...] = (),
) -> str:
    """The manager's component config bound to ``host``, its webhook certificates at the host's folder, its
    leader election in the pod's ``namespace``, the ``disabled_features`` off."""
    config: Manifest = yaml.safe_load(text) or {}
    if disabled_features:
        gates = dict(config.get("featureGates") or {})
        gates.update(dict.fromkeys(disabled_features, False))
        config["featureGates"] = gates
    election = dict(config.get("leaderElection") or {})
    if not election.get("resourceNamespace"):
        election["resourceNamespace"] = namespace
    webhook = dict(config.get("webhook") or {})
    webhook["host"] = host
    webhook.setdefault("port", _DEFAULT_WEBHOOK_PORT)
    webhook["certDir"] = rewrite(posixpath.normpath(webhook.get("certDir") or _DEFAULT_CERT_DIR))
    metrics = dict(config.get("metrics") or {})
    metrics["bindAddress"] = bind_on(str(metrics.get("bindAddress", _DEFAULT_METRICS)), host)
    health = dict(config.get("health") or {})
    health["healthProbeBindAddress"] = bind_on(
        str(health.get("healthProbeBindAddress", _DEFAULT_HEALTH)), host
    )
    adapted = {**config, "leaderElection": election, "webhook": webhook, "metrics": metrics, "health": health}
    return yaml.safe_dump(adapted, sort_keys=False)


def flags(profile: ControllerImage, kubeconfig_file: str, host: str) -> tuple[str, ...]:
    """The flags the twin adds to ``profile``'s command line: the kubeconfig and the bind address, for a
    program that takes them by flag (a later flag wins, so they override the chart's)."""
    added = []
    if profile.kubeconfig_flag:
        added.append(f"{profile.kubeconfig_flag}{kubeconfig_file}")
    if profile.bind_address_flag:
        added.append(f"{profile.bind_address_flag}{host}")
    return tuple(added)


def config_path(argv: tuple[str, ...]) -> str | None:
    """The host path the process reads its configuration from (``--config=PATH``)."""
    for part in argv:
        if part.startswith(CONFIG_FLAG):
            return part[len(CONFIG_FLAG) :]
    return None


def kubeconfig(server: str, account_folder: Path) -> str:
    """A kubeconfig that authenticates as the pod's service account, with the files the kubelet mounted."""
    cluster = {"server": server, "certificate-authority": str(account_folder / "ca.crt")}
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "in-cluster", "cluster": cluster}],
            "users": [{"name": "service-account", "user": {"tokenFile": str(account_folder / "token")}}],
            "contexts": [
                {"name": "in-cluster", "context": {"cluster": "in-cluster", "user": "service-account"}}
            ],
            "current-context": "in-cluster",
        },
        sort_keys=False,
    )


def ports(container: Manifest) -> dict[str, int]:
    """The container's ports by name (an unnamed one under its number)."""
    found = {}
    for port in container.get("ports") or []:
        number = int(port["containerPort"])
        found[str(port.get("name") or number)] = number
    return found
