"""The configuration of the kwok controller that plays the kubelet of every emulated node (pure).

kwok ships no lifecycle stages of its own (kwokctl normally supplies them), and its stock "fast" pod stages
complete Job pods at once and delete pods without a terminal phase, which would hide exactly what the twin
is for. These stages make a simulated pod behave like a kubelet's:

- scheduled pods start Running;
- a pod asked to terminate (a deletion timestamp, from an eviction or a delete, or the platform's SIGTERM
  annotation) ends with exit code 143 (or :data:`TERMINATION_EXIT_CODE`), phase Failed, keeping any
  ``DisruptionTarget`` condition the API server set; after :data:`TERMINATION_DURATION` if the pod asks;
- a pod may complete by itself: :data:`EXIT_CODE` after :data:`RUN_DURATION`;
- a terminal pod being deleted goes once its finalizers (the Job controller's tracking finalizer) are gone;
- PVCs of the :data:`STORAGE_CLASS` are bound at once to a fake volume with the claim's access modes
  (ReadWriteMany included).

Pods annotated :data:`RUN` ``=`` :data:`RUN_LOCAL`, the pods of the package's own controllers (labelled
:data:`~together_clusters.platform.CONTROLLER_LABEL`, :func:`runs_locally`), and pods of the controller images
the twin runs as local binaries (:mod:`.controller_images`), are left out of every pod stage: the twin runs their main
container as a real local process instead (:mod:`together_clusters.emulator.kubernetes.local_runtime`), and
kwok serves their logs to the API server as a kubelet would (a ``Logs`` object per pod, :func:`logs_crd`;
nodes advertise kwok's server as their kubelet endpoint).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from together_clusters.platform import CONTROLLER_LABEL

# Annotations a test (or a user of the twin) puts on a pod to steer its simulated containers.
EXIT_CODE = "twin.together.ai/exit-code"
"""The containers exit by themselves with this code (``"0"``: the pod Succeeds), after :data:`RUN_DURATION`."""
RUN_DURATION = "twin.together.ai/run-duration"
"""How long (a Go duration such as ``"30s"``) the containers run before exiting with :data:`EXIT_CODE`."""
TERMINATION_EXIT_CODE = "twin.together.ai/termination-exit-code"
"""The exit code the containers end with when terminated (SIGTERM); default ``143``."""
TERMINATION_DURATION = "twin.together.ai/termination-duration"
"""How long the containers take to exit after SIGTERM (e.g. to checkpoint); default at once."""
SIGTERM = "twin.together.ai/sigterm"
"""Set by the platform to deliver SIGTERM to the pod's containers without deleting the pod."""
RUN = "twin.together.ai/run"
"""``local`` (:data:`RUN_LOCAL`): the twin runs the pod's main container as a real local process (its
command, env and volumes; see :mod:`together_clusters.emulator.kubernetes.local_pods`) instead of simulating
it; the annotations above do not apply to it (a real process exits by itself and on a real SIGTERM)."""
RUN_LOCAL = "local"


def runs_locally(annotations: Mapping[str, str] | None, labels: Mapping[str, str] | None) -> bool:
    """Whether the twin runs a pod of these annotations and labels as a local process (see :data:`RUN`): it
    opted in, or it is one of the package's own controllers (:data:`~together_clusters.platform.CONTROLLER_LABEL`:
    the fleet's dispatcher, the remediation gate), which a program written for the real service runs without
    any marker of the twin's. Pods of the controller images are recognised by their image instead
    (:mod:`.controller_images`)."""
    return (annotations or {}).get(RUN) == RUN_LOCAL or CONTROLLER_LABEL in (labels or {})


MANAGED_NODE_ANNOTATION = "kwok.x-k8s.io/node"
MANAGED_NODE_VALUE = "fake"
STORAGE_CLASS = "kwok-volume"
"""The default StorageClass of a twin cluster, provisioned by kwok."""
NODE_LEASE_SECONDS = 40
POD_CIDR = "10.244.0.1/16"

_NOW = "{{ $now := Now }}\n"


def _code_of(annotation: str, default: str) -> str:
    """Sets ``$code`` to the pod's ``annotation``, or ``default`` when the pod has none."""
    return (
        f'{{{{ $code := "{default}" }}}}'
        "{{ with .metadata.annotations }}"
        f'{{{{ with index . "{annotation}" }}}}{{{{ $code = . }}}}{{{{ end }}}}'
        "{{ end }}\n"
    )


_TERMINATION_CODE = _code_of(TERMINATION_EXIT_CODE, "143")
_EXIT_CODE = _code_of(EXIT_CODE, "0")


# The parts of the pod status templates below (Go templates, ``$now`` set).
def _condition(kind: str, status: str, reason: str | None = None) -> str:
    """A pod condition entry, last changed at ``$now``."""
    entry = '- lastTransitionTime: {{ $now | Quote }}\n  status: "' + status + '"\n  type: ' + kind + "\n"
    return entry + (f"  reason: {reason}\n" if reason else "")


def _container_status(ready: str) -> str:
    """The first fields of the status of the container ``.`` (inside a ``range`` over containers)."""
    return (
        "- image: {{ .image | Quote }}\n  name: {{ .name | Quote }}\n  ready: "
        + ready
        + "\n  restartCount: 0\n"
    )


_STARTED = "  started: true\n  state:\n    running:\n      startedAt: {{ $now | Quote }}\n"
"""A container status's fields for a container running since ``$now``."""


def _terminated(exit_code: str, reason: str, started_at: str) -> str:
    """A container status's state: terminated at ``$now`` with ``exit_code``."""
    return (
        "  state:\n    terminated:\n"
        f"      exitCode: {exit_code}\n"
        "      finishedAt: {{ $now | Quote }}\n"
        f"      reason: {reason}\n"
        f"      startedAt: {started_at}\n"
    )


def _addresses(field: str, function: str) -> str:
    """``<field>`` and ``<field>s``: the IPs kwok's template ``function`` gives, if any."""
    return (
        f"{{{{ ${field}s := {function} }}}}\n"
        f"{{{{ with ${field}s }}}}\n"
        f"{field}: {{{{ index . 0 | Quote }}}}\n"
        f"{field}s:\n"
        "{{ range . }}\n- ip: {{ . | Quote }}\n{{ end }}\n"
        "{{ end }}\n"
    )


# Containers terminated with $code; the pod Succeeded on 0, else Failed. Conditions merge by type, so a
# DisruptionTarget condition set by the API server (eviction) stays.
_TERMINATED = (
    "{{ $started := or .status.startTime $now }}\n"
    "conditions:\n"
    + _condition("Ready", "False", "PodCompleted")
    + _condition("ContainersReady", "False", "PodCompleted")
    + "containerStatuses:\n{{ range .spec.containers }}\n"
    + _container_status("false")
    + "  started: false\n"
    + _terminated(
        "{{ $code }}", '{{ if eq $code "0" }}Completed{{ else }}Error{{ end }}', "{{ $started | Quote }}"
    )
    + "{{ end }}\n"
    'phase: {{ if eq $code "0" }}Succeeded{{ else }}Failed{{ end }}\n'
)

_POD_RUNNING = (
    _NOW
    + "conditions:\n"
    + _condition("Initialized", "True")
    + _condition("Ready", "True")
    + _condition("ContainersReady", "True")
    + "{{ range .spec.readinessGates }}\n"
    + _condition("{{ .conditionType | Quote }}", "True")
    + "{{ end }}\n"
    "containerStatuses:\n{{ range .spec.containers }}\n"
    + _container_status("true")
    + _STARTED
    + "{{ end }}\n"
    "initContainerStatuses:\n{{ range .spec.initContainers }}\n"
    + _container_status("true")
    + '  {{ if eq .restartPolicy "Always" }}\n'
    + _STARTED
    + "  {{ else }}\n"
    + _terminated("0", "Completed", "{{ $now | Quote }}")
    + "  {{ end }}\n"
    "{{ end }}\n"
    + _addresses("hostIP", "NodeIPsWith .spec.nodeName")
    + _addresses(
        "podIP",
        'PodIPsWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" )'
        ' ( or .metadata.namespace "" )',
    )
    + """\
phase: Running
startTime: {{ $now | Quote }}
"""
)


def _resources_or_plenty(field: str) -> str:
    """A node's ``status.<field>`` as it is, or plenty of everything when it has none."""
    return (
        f"{field}:\n"
        f"{{{{ with .status.{field} }}}}\n"
        "{{ YAML . 1 }}\n"
        "{{ else }}\n"
        "  cpu: 1k\n  memory: 1Ti\n  pods: 1M\n"
        "{{ end }}\n"
    )


_NODE_CONDITIONS = """\
{{ $now := Now }}
{{ $lastTransitionTime := or .metadata.creationTimestamp $now }}
conditions:
{{ range NodeConditions }}
- lastHeartbeatTime: {{ $now | Quote }}
  lastTransitionTime: {{ $lastTransitionTime | Quote }}
  message: {{ .message | Quote }}
  reason: {{ .reason | Quote }}
  status: {{ .status | Quote }}
  type: {{ .type | Quote }}
{{ end }}
addresses:
{{ with .status.addresses }}
{{ YAML . 1 }}
{{ else }}
{{ with NodeIP }}
- address: {{ . | Quote }}
  type: InternalIP
{{ end }}
{{ with NodeName }}
- address: {{ . | Quote }}
  type: Hostname
{{ end }}
{{ end }}
{{ with NodePort }}
daemonEndpoints:
  kubeletEndpoint:
    Port: {{ . }}
{{ end }}
"""

_NODE_INITIALIZE = (
    _NODE_CONDITIONS
    + """\
"""
    + _resources_or_plenty("allocatable")
    + _resources_or_plenty("capacity")
    + """\
nodeInfo:
  architecture: amd64
  kubeletVersion: {{ printf "kwok-%s" Version | Quote }}
  containerRuntimeVersion: {{ printf "kwok-%s" Version | Quote }}
  kernelVersion: {{ printf "kwok-%s" Version | Quote }}
  operatingSystem: linux
phase: Running
"""
)


def _expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    expression: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        expression["values"] = list(values)
    return expression


def _annotation(name: str) -> str:
    return f'.metadata.annotations["{name}"]'


def _label(name: str) -> str:
    return f'.metadata.labels["{name}"]'


def _stage(
    name: str,
    kind: str,
    selector: list[dict[str, Any]],
    *,
    status: str | None = None,
    delete: bool = False,
    delay_from: str | None = None,
    delay_ms: int | None = None,
    jitter_ms: int | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resourceRef": {"apiGroup": "v1", "kind": kind},
        "selector": {"matchExpressions": selector},
    }
    if delay_from is not None or delay_ms is not None:
        delay: dict[str, Any] = {"durationMilliseconds": delay_ms or 0}
        if delay_from is not None:
            delay["durationFrom"] = {"expressionFrom": _annotation(delay_from)}
        if jitter_ms is not None:
            delay["jitterDurationMilliseconds"] = jitter_ms
        spec["delay"] = delay
    steps: list[dict[str, Any]] = []
    if status is not None:
        steps.append(
            {"patch": {"root": "status", "subresource": "status", "type": "strategic", "template": status}}
        )
    if delete:
        steps.append({"delete": True})
    spec["steps"] = steps
    return {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": name}, "spec": spec}


_READY = '.status.conditions.[] | select( .type == "Ready" ) | .status'
"""The status of an object's Ready condition (a node's, a pod's)."""


def node_stages() -> list[dict[str, Any]]:
    """A new node becomes Ready at once; afterwards its lease keeps it Ready (status refreshed rarely)."""
    return [
        _stage("node-initialize", "Node", [_expr(_READY, "NotIn", "True")], status=_NODE_INITIALIZE),
        _stage(
            "node-heartbeat-with-lease",
            "Node",
            [_expr(".status.phase", "In", "Running"), _expr(_READY, "In", "True")],
            status=_NODE_CONDITIONS,
            delay_ms=600_000,
            jitter_ms=610_000,
        ),
    ]


def pod_stages(local_images: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Pods as a kubelet runs them (see the module docstring); pods the local runtime runs (opted in, the
    package's own controllers, or of one of ``local_images``, the controllers it runs as local binaries) are
    left alone."""
    simulated = [_expr(_annotation(RUN), "DoesNotExist"), _expr(_label(CONTROLLER_LABEL), "DoesNotExist")]
    if local_images:
        listed = ", ".join(f"'{image}'" for image in local_images)
        simulated.append({"cel": {"expression": f"!(self.spec.containers[0].image in [{listed}])"}})
    alive = _expr(".metadata.deletionTimestamp", "DoesNotExist")
    deleting = _expr(".metadata.deletionTimestamp", "Exists")
    not_terminal = _expr(".status.phase", "NotIn", "Succeeded", "Failed")

    def ends(name: str, selector: list[dict[str, Any]], code: str, delay_from: str) -> dict[str, Any]:
        """The containers terminate with ``code`` after the duration the pod's ``delay_from`` asks."""
        return _stage(
            name, "Pod", [*simulated, *selector], status=_NOW + code + _TERMINATED, delay_from=delay_from
        )

    def running_with(annotation: str) -> list[dict[str, Any]]:
        return [alive, _expr(".status.phase", "In", "Running"), _expr(_annotation(annotation), "Exists")]

    return [
        _stage(
            "pod-ready",
            "Pod",
            [*simulated, alive, _expr(".status.phase", "In", "Pending"), _expr(_READY, "NotIn", "True")],
            status=_POD_RUNNING,
        ),
        ends("pod-complete", running_with(EXIT_CODE), _EXIT_CODE, RUN_DURATION),
        ends("pod-sigterm", running_with(SIGTERM), _TERMINATION_CODE, TERMINATION_DURATION),
        ends("pod-terminate", [deleting, not_terminal], _TERMINATION_CODE, TERMINATION_DURATION),
        _stage(
            "pod-delete",
            "Pod",
            [
                *simulated,
                deleting,
                _expr(".status.phase", "In", "Succeeded", "Failed"),
                _expr(".metadata.finalizers", "DoesNotExist"),
            ],
            delete=True,
        ),
    ]


_PV_OF_CLASS = f"self.spec.storageClassName == '{STORAGE_CLASS}'"


def _cel_stage(name: str, kind: str, expressions: list[str], steps: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": name},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": kind},
            "selector": {"matchExpressions": [{"cel": {"expression": e}} for e in expressions]},
            "steps": steps,
        },
    }


def volume_stages() -> list[dict[str, Any]]:
    """A fake provisioner: a PVC of :data:`STORAGE_CLASS` is bound to a new PV with its access modes."""
    pv = """\
apiVersion: v1
kind: PersistentVolume
metadata:
  name: pvc-{{ .metadata.uid }}
  annotations:
    pv.kubernetes.io/provisioned-by: kwok.x-k8s.io/volume
spec:
  accessModes:
  {{ YAML .spec.accessModes 2 }}
  capacity:
  {{ YAML .spec.resources.requests 2 }}
  persistentVolumeReclaimPolicy: Delete
  storageClassName: {{ .spec.storageClassName | Quote }}
  volumeMode: {{ default "Filesystem" .spec.volumeMode | Quote }}
  claimRef:
    apiVersion: v1
    kind: PersistentVolumeClaim
    name: {{ .metadata.name | Quote }}
    namespace: {{ .metadata.namespace | Quote }}
    resourceVersion: {{ .metadata.resourceVersion | Quote }}
    uid: {{ .metadata.uid | Quote }}
  hostPath:
    path: /tmp/kwok-volumes/pvc-{{ .metadata.uid }}
    type: DirectoryOrCreate
"""
    return [
        _cel_stage(
            "pvc-provision",
            "PersistentVolumeClaim",
            [
                _PV_OF_CLASS,
                "!has(self.metadata.deletionTimestamp)",
                "!has(self.spec.volumeName)",
                "self.status.phase != 'Bound'",
            ],
            [
                {"apply": {"template": pv}},
                {
                    "patch": {
                        "root": "metadata",
                        "template": "annotations:\n"
                        '  pv.kubernetes.io/bind-completed: "yes"\n'
                        '  pv.kubernetes.io/bound-by-controller: "yes"\n'
                        "  volume.kubernetes.io/storage-provisioner: kwok.x-k8s.io/volume\n",
                    }
                },
                {"patch": {"root": "spec", "template": "volumeName: pvc-{{ .metadata.uid }}\n"}},
                {
                    "patch": {
                        "root": "status",
                        "subresource": "status",
                        "template": "phase: Bound\naccessModes:\n{{ YAML .spec.accessModes 1 }}\n"
                        "capacity:\n{{ YAML .spec.resources.requests 1 }}\n",
                    }
                },
            ],
        ),
        _cel_stage(
            "pv-bind",
            "PersistentVolume",
            [
                _PV_OF_CLASS,
                "!has(self.metadata.deletionTimestamp)",
                "has(self.spec.claimRef.name)",
                "!(self.status.phase in ['Bound', 'Released', 'Failed'])",
            ],
            [
                {
                    "patch": {
                        "root": "status",
                        "subresource": "status",
                        "template": "phase: Bound\nlastPhaseTransitionTime: {{ Now | Quote }}\n",
                    }
                }
            ],
        ),
        _cel_stage(
            "pv-delete",
            "PersistentVolume",
            [
                _PV_OF_CLASS,
                "!has(self.metadata.deletionTimestamp)",
                "self.spec.persistentVolumeReclaimPolicy == 'Delete'",
                "self.status.phase == 'Released'",
            ],
            [{"delete": True}],
        ),
    ]


def storage_class() -> dict[str, Any]:
    """The default StorageClass the fake provisioner serves."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {
            "name": STORAGE_CLASS,
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
        },
        "provisioner": "kwok.x-k8s.io/volume",
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
    }


LOGS_GROUP = "kwok.x-k8s.io"
LOGS_VERSION = "v1alpha1"
LOGS_PLURAL = "logs"
LOGS_KIND = "Logs"


def logs_crd() -> dict[str, Any]:
    """kwok's ``Logs`` resource (kwok.x-k8s.io/v1alpha1, as kwok v0.8.0's CRD defines it): one per pod,
    naming the file kwok serves as a container's log (``kubectl logs``, the API's pod log)."""
    log = {
        "type": "object",
        "properties": {
            "containers": {"type": "array", "items": {"type": "string"}},
            "follow": {"type": "boolean"},
            "logsFile": {"type": "string"},
            "previousLogsFile": {"type": "string"},
        },
    }
    schema = {
        "type": "object",
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {
                "type": "object",
                "required": ["logs"],
                "properties": {"logs": {"type": "array", "items": log}},
            },
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{LOGS_PLURAL}.{LOGS_GROUP}"},
        "spec": {
            "group": LOGS_GROUP,
            "names": {"kind": LOGS_KIND, "listKind": "LogsList", "plural": LOGS_PLURAL, "singular": "logs"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": LOGS_VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": {"status": {}},
                }
            ],
        },
    }


def configuration(local_images: tuple[str, ...] = ()) -> str:
    """The whole ``--config`` file: options (every parallelism set: kwok applies no defaults to a config
    file) followed by every stage."""
    options = {
        "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
        "kind": "KwokConfiguration",
        "options": {
            "cidr": POD_CIDR,
            "manageNodesWithAnnotationSelector": f"{MANAGED_NODE_ANNOTATION}={MANAGED_NODE_VALUE}",
            "nodeLeaseDurationSeconds": NODE_LEASE_SECONDS,
            "podPlayStageParallelism": 4,
            "nodePlayStageParallelism": 4,
            "nodeLeaseParallelism": 4,
            "podsOnNodeSyncParallelism": 4,
            "enablePodsOnNodeSyncListPager": True,
            "enablePodsOnNodeSyncStreamWatch": True,
            # The kubelet API's /containerLogs (pod logs of the local runtime's processes).
            "enableDebuggingHandlers": True,
        },
    }
    return yaml.safe_dump_all(
        [options, *node_stages(), *pod_stages(local_images), *volume_stages()], sort_keys=False
    )
