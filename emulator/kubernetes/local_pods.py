"""What a kubelet would run for a pod, as a local process: command, environment, folders (pure).

A pod annotated ``twin.together.ai/run: local`` (:data:`~.kwok_config.RUN`), and a pod of the package's own
controllers (labelled :data:`~together_clusters.platform.CONTROLLER_LABEL`: the fleet's dispatcher, the
remediation gate, which need no marker of the twin's), is run by the twin's local runtime
(:mod:`.local_runtime`) instead of being simulated by kwok. This module turns the pod's object, as the API
returns it, into a :class:`ProcessPlan`:

- **The main container** (the first one; the pod may have no other container and no init containers) runs its
  ``command`` + ``args``, ``$(VAR)`` references expanded as the kubelet does. A leading ``python`` or
  ``python3`` is the emulator's own interpreter (the image is not pulled: the program runs with the
  emulator's Python and packages, so ``python -m together_clusters...`` works); its folder comes first on
  ``PATH``, so a ``python`` the program starts (a launcher's child) is the same.
- **Environment** as the kubelet builds it: ``envFrom`` (ConfigMaps, Secrets, with prefixes), then ``env`` in
  order with plain values, ``fieldRef`` (metadata name, namespace, uid, labels and annotations, the Job
  controller's ``batch.kubernetes.io/job-completion-index`` included; spec.nodeName,
  spec.serviceAccountName; status.hostIP and podIP, both ``127.0.0.1``), ``configMapKeyRef`` and
  ``secretKeyRef`` (``optional`` honoured). On top of a small base: ``PATH``, ``HOSTNAME`` (the pod's name),
  ``HOME`` (a folder of the pod's).
- **Volumes**, one host folder each: a PersistentVolumeClaim is the folder of its bound volume, shared by
  every pod using the claim (so a ReadWriteMany checkpoint volume really is shared), and for the static
  PersistentVolume of a Together shared volume the volume's own folder, which outlives the cluster; ``emptyDir`` a folder of
  the pod's; ``configMap`` and ``secret`` volumes their keys (or ``items``) as files; ``hostPath`` a folder of
  the node's. ``subPath`` is honoured; ``readOnly`` is not enforced.
- **Mount paths are the runtime's one liberty.** The process sees the host's file system (no mount namespace:
  that needs privileges or unprivileged user namespaces, which CI runners such as Ubuntu 24.04's restrict),
  so every env value, argument and ``workingDir`` that is a mount path or starts with one (``/checkpoints``,
  ``/checkpoints/run-1/ckpt``), and the value of a ``--flag=`` argument that does
  (``--policy-config-file=/policy-dir/policy.yaml``), is rewritten to the host folder behind it. A program that builds paths from
  pieces it did not get through env, args or its working directory does not see its volumes.
- **The emulator's clock speed applies to time budgets.** The twin plays the platform at ``speed`` emulated
  seconds per real second, so a pod's 300 s grace period lasts 300/speed real seconds. The checkpoint
  runtime's budgets (``CHECKPOINT_SAVE_BUDGET_SECONDS``, ``DRAIN_BUDGET_SECONDS``) are divided by the speed
  likewise, so the program aims at a budget it can meet inside the real grace.

A pod the runtime cannot run (a missing ConfigMap, an unbound claim, several containers) gets a
:class:`Unrunnable` with the reason a kubelet reports and stays Pending, as on a real node.
"""

from __future__ import annotations

import base64
import os
import posixpath
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from together_clusters.components.checkpoint import contract

from . import controller_images
from .controller_images import ControllerImage
from .kwok_config import runs_locally

Manifest = dict[str, Any]
LOCAL_IP = "127.0.0.1"
"""The host and pod IP of a locally run pod: its process listens on the emulator's loopback."""
PYTHON_COMMANDS = frozenset({"python", "python3"})
SCALED_ENV = (contract.ENV_SAVE_BUDGET, contract.ENV_DRAIN_BUDGET)
"""Budgets in seconds of the pod's (emulated) time, divided by the clock speed for the real process."""
_FIELD = re.compile(r"^metadata\.(labels|annotations)\['(.+)'\]$")
_REFERENCE = re.compile(r"\$\$|\$\(([-._a-zA-Z][-._a-zA-Z0-9]*)\)")


class Unrunnable(Exception):
    """The pod cannot be started (yet): ``reason`` as a kubelet reports it in the container's waiting state."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message


class Lookups(Protocol):
    """What the plan reads from the cluster besides the pod (``None``: not found)."""

    def config_map(self, namespace: str, name: str) -> Mapping[str, str] | None: ...

    def secret(self, namespace: str, name: str) -> Mapping[str, str] | None:
        """The Secret's ``data`` (base64 values, as the API returns them)."""
        ...

    def claim_volume(self, namespace: str, claim: str) -> str | None:
        """The name of the volume the claim is bound to; ``None`` while it is not bound."""
        ...

    def service_account_token(self, namespace: str, service_account: str, audience: str | None) -> str:
        """A token of the service account (the TokenRequest API), for a projected token volume."""
        ...


@dataclass(frozen=True)
class Layout:
    """Where the runtime keeps things on the host."""

    root: Path
    shared_volumes: Mapping[str, Path] = field(default_factory=dict)
    """The cluster's shared volumes' PersistentVolumes: name -> the volume's own folder (outside ``root``,
    so a cluster attached to the same volume later sees the same files; see :mod:`.shared_volumes`)."""

    def pod(self, pod: Manifest) -> Path:
        meta = pod["metadata"]
        return self.root / "pods" / f"{meta['namespace']}_{meta['name']}_{meta['uid']}"

    def volume(self, volume_name: str) -> Path:
        """The folder of a bound PersistentVolume, shared by every pod whose claim is bound to it: a shared
        volume's own folder, else one of the cluster's."""
        shared = self.shared_volumes.get(volume_name)
        return shared if shared is not None else self.root / "volumes" / volume_name

    def node(self, node_name: str) -> Path:
        return self.root / "nodes" / node_name


@dataclass(frozen=True)
class ProcessPlan:
    """How to start the pod's main container as a process."""

    container: str
    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: Path
    log_file: Path
    folders: tuple[Path, ...] = ()
    """Folders to create before the start (volumes, home, working directory)."""
    files: Mapping[Path, bytes] = field(default_factory=dict)
    """ConfigMap and Secret volume files to write before the start."""
    mounts: Mapping[str, Path] = field(default_factory=dict)
    """Mount path in the container -> host folder or file."""
    synced: frozenset[Path] = frozenset()
    """The files of ConfigMap and Secret volumes mounted whole, which a kubelet keeps up to date while the
    pod runs (a ``subPath`` mount and a projected token are not)."""
    synced_folders: frozenset[Path] = frozenset()
    """The host folders of those volumes, kept up to date even while they hold no file: a Secret created
    empty (Kueue's chart's webhook Secret) gets its keys once the pod's own rotator wrote them."""


@dataclass(frozen=True)
class PodNetwork:
    """A pod's own addresses: the IP the API reports, and the loopback address its process binds."""

    pod_ip: str = "127.0.0.1"
    host_ip: str = "127.0.0.1"


@dataclass(frozen=True)
class Controller:
    """A controller image's pod (see :mod:`.controller_images`): the binary that runs it and the API server."""

    profile: ControllerImage
    binary: Path
    api_server: str


def opted_in(pod: Manifest) -> bool:
    """Whether the pod is run by the local runtime by its metadata: it asks to be (:data:`~.kwok_config.RUN`),
    or it is one of the package's own controllers (see :func:`~.kwok_config.runs_locally`)."""
    meta = pod["metadata"]
    return runs_locally(meta.get("annotations"), meta.get("labels"))


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion: defined variables are replaced, ``$$`` is ``$``, the rest stays."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return "$"
        return env.get(name, match.group(0))

    return _REFERENCE.sub(one, text)


def rewrite(value: str, mounts: Mapping[str, Path]) -> str:
    """``value`` with a leading mount path replaced by its host folder (the longest mount path wins)."""
    for mount_path in sorted(mounts, key=len, reverse=True):
        base = mount_path.rstrip("/") or "/"
        if value == base or value.startswith(base.rstrip("/") + "/"):
            return str(mounts[mount_path]) + value[len(base.rstrip("/")) :]
    return value


def rewrite_argument(argument: str, mounts: Mapping[str, Path]) -> str:
    """A command-line argument rewritten as :func:`rewrite` does, the value of ``--flag=VALUE`` included."""
    flag, equals, value = argument.partition("=")
    if argument.startswith("-") and equals:
        return f"{flag}={rewrite(value, mounts)}"
    return rewrite(argument, mounts)


def _field(pod: Manifest, path: str, network: PodNetwork) -> str:
    meta, spec = pod["metadata"], pod.get("spec") or {}
    simple = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName"),
        "status.hostIP": LOCAL_IP,
        "status.podIP": network.pod_ip,
        "status.podIPs": network.pod_ip,
        "status.hostIPs": LOCAL_IP,
    }
    if path in simple:
        return str(simple[path] or "")
    match = _FIELD.match(path)
    if match is None:
        raise Unrunnable("CreateContainerConfigError", f"the local runtime cannot resolve fieldRef {path!r}")
    return str((meta.get(match.group(1)) or {}).get(match.group(2), ""))


def _decoded(data: Mapping[str, str]) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in data.items()}


def _key_ref(kind: str, ref: Mapping[str, Any], found: Mapping[str, str] | None) -> str | None:
    name, key, optional = ref.get("name", ""), ref["key"], bool(ref.get("optional"))
    if found is None or key not in found:
        if optional:
            return None
        missing = (
            f"{kind} {name!r} not found" if found is None else f"key {key!r} not found in {kind} {name!r}"
        )
        raise Unrunnable("CreateContainerConfigError", missing)
    return found[key]


def _environment(
    pod: Manifest, container: Manifest, lookups: Lookups, base: Mapping[str, str], network: PodNetwork
) -> dict[str, str]:
    namespace = pod["metadata"]["namespace"]
    env = dict(base)
    for source in container.get("envFrom") or []:
        prefix = source.get("prefix", "")
        if "configMapRef" in source:
            ref, kind = source["configMapRef"], "configmap"
            found = lookups.config_map(namespace, ref["name"])
        else:
            ref, kind = source["secretRef"], "secret"
            data = lookups.secret(namespace, ref["name"])
            found = None if data is None else _decoded(data)
        if found is None and not ref.get("optional"):
            raise Unrunnable("CreateContainerConfigError", f"{kind} {ref['name']!r} not found")
        env.update({prefix + k: v for k, v in (found or {}).items()})
    for item in container.get("env") or []:
        name = item["name"]
        source = item.get("valueFrom")
        if source is None:
            env[name] = expand(item.get("value", ""), env)
        elif "fieldRef" in source:
            env[name] = _field(pod, source["fieldRef"]["fieldPath"], network)
        elif "configMapKeyRef" in source:
            ref = source["configMapKeyRef"]
            value = _key_ref("configmap", ref, lookups.config_map(namespace, ref.get("name", "")))
            if value is not None:
                env[name] = value
        elif "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            data = lookups.secret(namespace, ref.get("name", ""))
            value = _key_ref("secret", ref, None if data is None else _decoded(data))
            if value is not None:
                env[name] = value
        else:
            raise Unrunnable("CreateContainerConfigError", f"env {name}: the local runtime cannot resolve it")
    return env


def _volume_files(
    source: Mapping[str, Any], data: Mapping[str, bytes], folder: Path, kind: str
) -> dict[Path, bytes]:
    items = source.get("items")
    if items is None:
        return {folder / key: value for key, value in data.items()}
    files = {}
    for item in items:
        if item["key"] not in data:
            if source.get("optional"):
                continue
            raise Unrunnable("CreateContainerConfigError", f"key {item['key']!r} not found in {kind}")
        files[folder / item["path"]] = data[item["key"]]
    return files


def _projected(
    pod: Manifest, projected: Mapping[str, Any], lookups: Lookups, folder: Path, network: PodNetwork
) -> dict[Path, bytes]:
    """A projected volume (such as the service account's ``kube-api-access-*``): its sources' files."""
    namespace = pod["metadata"]["namespace"]
    files: dict[Path, bytes] = {}
    for source in projected.get("sources") or []:
        if "serviceAccountToken" in source:
            token = source["serviceAccountToken"]
            account = (pod.get("spec") or {}).get("serviceAccountName") or "default"
            value = lookups.service_account_token(namespace, account, token.get("audience"))
            files[folder / token["path"]] = value.encode()
        elif "configMap" in source:
            ref = source["configMap"]
            found = lookups.config_map(namespace, ref.get("name", ""))
            if found is None and not ref.get("optional"):
                raise Unrunnable("ContainerCreating", f"configmap {ref.get('name')!r} not found")
            data = {k: v.encode() for k, v in (found or {}).items()}
            files.update(_volume_files(ref, data, folder, f"configmap {ref.get('name')!r}"))
        elif "secret" in source:
            ref = source["secret"]
            secret = lookups.secret(namespace, ref.get("name", ""))
            if secret is None and not ref.get("optional"):
                raise Unrunnable("ContainerCreating", f"secret {ref.get('name')!r} not found")
            data = {k: base64.b64decode(v) for k, v in (secret or {}).items()}
            files.update(_volume_files(ref, data, folder, f"secret {ref.get('name')!r}"))
        elif "downwardAPI" in source:
            for item in source["downwardAPI"].get("items") or []:
                if "fieldRef" not in item:
                    raise Unrunnable(
                        "ContainerCreating", f"downwardAPI {item['path']!r}: only fieldRef is supported"
                    )
                files[folder / item["path"]] = _field(pod, item["fieldRef"]["fieldPath"], network).encode()
        else:
            kinds = ", ".join(sorted(source))
            raise Unrunnable("ContainerCreating", f"projected source {kinds}: not supported locally")
    return files


def _volumes(
    pod: Manifest, lookups: Lookups, layout: Layout, network: PodNetwork
) -> tuple[dict[str, Path], list[Path], dict[Path, bytes], set[str]]:
    """Each volume's host folder; folders to create; files to write; the ConfigMap and Secret volumes."""
    namespace = pod["metadata"]["namespace"]
    own = layout.pod(pod) / "volumes"
    folders: dict[str, Path] = {}
    create: list[Path] = []
    files: dict[Path, bytes] = {}
    kept_current: set[str] = set()
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        name = volume["name"]
        if "persistentVolumeClaim" in volume:
            claim = volume["persistentVolumeClaim"]["claimName"]
            bound = lookups.claim_volume(namespace, claim)
            if bound is None:
                raise Unrunnable("ContainerCreating", f"persistentvolumeclaim {claim!r} is not bound yet")
            folders[name] = layout.volume(bound)
        elif "emptyDir" in volume:
            folders[name] = own / name
        elif "configMap" in volume or "secret" in volume:
            kind = "configMap" if "configMap" in volume else "secret"
            source = volume[kind]
            ref = source.get("name") if kind == "configMap" else source.get("secretName")
            folders[name] = own / name
            if kind == "configMap":
                found = lookups.config_map(namespace, ref or "")
                data = None if found is None else {k: v.encode() for k, v in found.items()}
            else:
                secret = lookups.secret(namespace, ref or "")
                data = None if secret is None else {k: base64.b64decode(v) for k, v in secret.items()}
            if data is None and not source.get("optional"):
                raise Unrunnable("ContainerCreating", f"{kind.lower()} {ref!r} not found")
            files.update(_volume_files(source, data or {}, folders[name], f"{kind.lower()} {ref!r}"))
            kept_current.add(name)
        elif "projected" in volume:
            folders[name] = own / name
            files.update(_projected(pod, volume["projected"], lookups, folders[name], network))
        elif "hostPath" in volume:
            node = (pod.get("spec") or {}).get("nodeName") or "node"
            folders[name] = layout.node(node) / volume["hostPath"]["path"].lstrip("/")
        else:
            kinds = sorted(k for k in volume if k != "name")
            raise Unrunnable(
                "ContainerCreating", f"volume {name!r} ({', '.join(kinds)}): not supported locally"
            )
        create.append(folders[name])
    return folders, create, files, kept_current


def _argv(command: Sequence[str], python: str) -> tuple[str, ...]:
    if not command:
        raise Unrunnable(
            "CreateContainerConfigError",
            "no command: the local runtime does not pull images, so it cannot know their entrypoint",
        )
    first = command[0]
    return (python if first in PYTHON_COMMANDS else first, *command[1:])


def plan(
    pod: Manifest,
    lookups: Lookups,
    layout: Layout,
    python: str,
    duration: Callable[[float], float],
    base_env: Mapping[str, str] | None = None,
    network: PodNetwork | None = None,
    controller: Controller | None = None,
    api_server: str | None = None,
) -> ProcessPlan:
    """The process that runs ``pod``'s main container; :class:`Unrunnable` when it cannot start.

    ``controller``: the pod is of a known controller image, run as its binary (see :func:`_as_controller`).
    ``api_server``: the cluster's; a pod with its service account token mounted gets a ``KUBECONFIG`` of that
    token for it (see :func:`_service_account_access`).
    """
    network = network or PodNetwork()
    spec = pod.get("spec") or {}
    containers = spec.get("containers") or []
    if len(containers) != 1 or spec.get("initContainers"):
        raise Unrunnable(
            "CreateContainerConfigError",
            "the local runtime runs pods of exactly one container and no init containers",
        )
    main = containers[0]
    home = layout.pod(pod) / "home"
    base = {
        # The interpreter's folder first: a ``python`` the program starts itself is the emulator's too.
        "PATH": os.pathsep.join((os.path.dirname(python), os.environ.get("PATH", "/usr/bin:/bin"))),
        "HOSTNAME": pod["metadata"]["name"],
        "HOME": str(home),
        **(base_env or {}),
    }
    env = _environment(pod, main, lookups, base, network)
    folders, create, files, kept_current = _volumes(pod, lookups, layout, network)
    mounts: dict[str, Path] = {}
    synced: set[Path] = set()
    synced_folders: set[Path] = set()
    for mount in main.get("volumeMounts") or []:
        if mount["name"] not in folders:
            raise Unrunnable("CreateContainerConfigError", f"volumeMount {mount['name']!r}: no such volume")
        host = folders[mount["name"]]
        if mount["name"] in kept_current and not mount.get("subPath"):
            synced.update(path for path in files if path.parent == host)
            synced_folders.add(host)
        if mount.get("subPath"):
            host = host / mount["subPath"]
            if host not in files:  # a ConfigMap key mounted as one file is written, not created as a folder
                create.append(host)
        mounts[mount["mountPath"]] = host
    for name in SCALED_ENV:
        if name in env:
            env[name] = f"{duration(float(env[name])):g}"
    command = [expand(part, env) for part in [*(main.get("command") or []), *(main.get("args") or [])]]
    env = {name: rewrite(value, mounts) for name, value in env.items()}
    argv = _argv([rewrite_argument(part, mounts) for part in command], python)
    if controller is not None:
        argv = _as_controller(controller, pod, argv, env, files, mounts, layout, network)
    elif api_server is not None:
        _service_account_access(api_server, pod, env, files, mounts, layout)
    working_dir = main.get("workingDir")
    cwd = Path(rewrite(posixpath.normpath(working_dir), mounts)) if working_dir else home
    return ProcessPlan(
        container=main["name"],
        argv=argv,
        env=env,
        cwd=cwd,
        log_file=layout.pod(pod) / "logs" / f"{main['name']}.log",
        folders=(home, cwd, *create),
        files=files,
        mounts=mounts,
        synced=frozenset(synced),
        synced_folders=frozenset(synced_folders),
    )


def _service_account_access(
    api_server: str,
    pod: Manifest,
    env: dict[str, str],
    files: dict[Path, bytes],
    mounts: Mapping[str, Path],
    layout: Layout,
) -> None:
    """Give a pod that has its service account token mounted (the API server's default) the API server as its
    in-cluster configuration would: a client reads that from a fixed folder the process cannot have of its own,
    so it gets a ``KUBECONFIG`` of the same token and CA (every Kubernetes client library reads it first) and
    ``KUBERNETES_SERVICE_HOST``/``PORT``. A pod whose program talks to its cluster (the remediation gate) then
    runs here as it would on a node, with its service account's permissions and no others."""
    account = mounts.get(controller_images.SERVICE_ACCOUNT_MOUNT)
    if account is None or "KUBECONFIG" in env:
        return
    kubeconfig = layout.pod(pod) / "kubeconfig"
    files[kubeconfig] = controller_images.kubeconfig(api_server, account).encode()
    host, _, port = api_server.removeprefix("https://").rpartition(":")
    env.update(
        {"KUBECONFIG": str(kubeconfig), "KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port}
    )


def _as_controller(
    controller: Controller,
    pod: Manifest,
    argv: tuple[str, ...],
    env: dict[str, str],
    files: dict[Path, bytes],
    mounts: Mapping[str, Path],
    layout: Layout,
    network: PodNetwork,
) -> tuple[str, ...]:
    """A controller image's process (see :mod:`.controller_images`): its binary, a kubeconfig of the pod's
    service account, and its configuration bound to the pod's own address. ``env`` and ``files`` gain what
    it needs; the argv is returned."""
    profile = controller.profile
    if argv[0] != profile.entrypoint:
        raise Unrunnable(
            "CreateContainerConfigError",
            f"the twin runs {profile.repository} as its {profile.entrypoint}, not {argv[0]!r}",
        )
    account = mounts.get(controller_images.SERVICE_ACCOUNT_MOUNT)
    if account is None:
        raise Unrunnable(
            "CreateContainerConfigError",
            f"no service account token mounted at {controller_images.SERVICE_ACCOUNT_MOUNT} "
            "(automountServiceAccountToken is off): the controller cannot reach the API server",
        )
    kubeconfig = layout.pod(pod) / "kubeconfig"
    files[kubeconfig] = controller_images.kubeconfig(controller.api_server, account).encode()
    host, _, port = controller.api_server.removeprefix("https://").rpartition(":")
    env.update(
        {"KUBECONFIG": str(kubeconfig), "KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port}
    )
    config = controller_images.config_path(argv)
    if config is not None:
        host_config = Path(rewrite(config, mounts))
        if host_config not in files:
            raise Unrunnable(
                "CreateContainerConfigError", f"--config={config}: no ConfigMap file mounted there"
            )
        files[host_config] = controller_images.adapt_config(
            files[host_config].decode(),
            network.host_ip,
            pod["metadata"]["namespace"],
            lambda value: rewrite(value, mounts),
            profile.disabled_features,
        ).encode()
        argv = tuple(
            f"{controller_images.CONFIG_FLAG}{host_config}"
            if part == f"{controller_images.CONFIG_FLAG}{config}"
            else part
            for part in argv
        )
    added = controller_images.flags(profile, str(kubeconfig), network.host_ip)
    return (str(controller.binary), *argv[1:], *added)


def describe(process_plan: ProcessPlan) -> str:
    """The command line, for logs and errors."""
    return shlex.join(process_plan.argv)
