"""The Pulumi package schema of the ``together`` provider, written from the field tables of ``schema``.

``provider/schema.py`` stays the one list of each resource's fields; this module only translates it into the
form Pulumi's engine and its SDK generators read (https://www.pulumi.com/docs/iac/extending-pulumi/schema/):

- names in camelCase (``num_gpus`` is ``numGpus``, ``kube_config`` is ``kubeConfig``), as every Pulumi
  package spells them; the Python SDK maps them back to the snake_case names of the API and of ``ClusterArgs``;
- ``replaceOnChanges`` on every field whose change replaces the resource (``OnChange.REPLACE``);
- ``secret`` on secret outputs (``kubeConfig``) and on the provider's ``apiKey``;
- enumerations from ``vocabulary`` (the official SDK's ``Literal`` types) as enum types, named as there;
- the nested inputs of ``nested_inputs`` as object types, named without their ``Args`` suffix;
- a field's description is its ``doc``, then the rule it is held to at preview (``constraint``).

The schema is committed beside this module as ``schema.json`` (shipped in the wheel, for the plugin to serve
and for SDK generators to read); ``tests/provider/test_package_schema.py`` fails when the file and the tables
disagree. Rewrite it with ``python -m together_clusters.provider.package_schema --write``.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import json
import re
import sys
import types as pytypes
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from together_clusters.components import args as workload_args
from together_clusters.components.controllers.releases import ClusterControllersArgs

from . import nested_inputs, vocabulary
from .client import DEFAULT_BASE_URL
from .environment import API_KEY_ENV, BASE_URL_ENV
from .schema import (
    FIELDS,
    OUTPUTS,
    VOLUME_FIELDS,
    VOLUME_OUTPUTS,
    FieldSpec,
    OnChange,
    OutputSpec,
)

PACKAGE = "together"
CLUSTER_TOKEN = f"{PACKAGE}:index:Cluster"
VOLUME_TOKEN = f"{PACKAGE}:index:Volume"
BATCH_JOB_TOKEN = f"{PACKAGE}:index:BatchJob"
SWEEP_TOKEN = f"{PACKAGE}:index:Sweep"
TRAINING_RUN_TOKEN = f"{PACKAGE}:index:TrainingRun"
BATCH_INFERENCE_TOKEN = f"{PACKAGE}:index:BatchInference"
CHECKPOINT_STORE_TOKEN = f"{PACKAGE}:index:CheckpointStore"
CLUSTER_CONTROLLERS_TOKEN = f"{PACKAGE}:index:ClusterControllers"
REMEDIATION_GATE_TOKEN = f"{PACKAGE}:index:RemediationGate"
SCHEMA_FILE = Path(__file__).resolve().with_name("schema.json")  # resolved: the editable install links

_PRIMITIVES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
_ENUM_NAMES: dict[tuple[str, ...], str] = {
    get_args(value): name for name, value in vars(vocabulary).items() if get_origin(value) is Literal
}
"""Each enumeration of ``vocabulary`` by its values, so a field typed with it is named as the SDK names it."""

_PROVIDER_CONFIG: dict[str, dict[str, Any]] = {
    "apiKey": {
        "type": "string",
        "secret": True,
        "description": f"The Together API key; {API_KEY_ENV} when unset.",
    },
    "baseUrl": {
        "type": "string",
        "description": f"The Together API's base URL; {BASE_URL_ENV} when unset, else {DEFAULT_BASE_URL}.",
    },
}


def camel(name: str) -> str:
    """``num_preemptible_gpus`` as Pulumi packages spell it: ``numPreemptibleGpus``."""
    first, *rest = name.split("_")
    return first + "".join(part.capitalize() for part in rest)


_UPPER = re.compile(r"(?<!^)(?=[A-Z])")


def snake(name: str) -> str:
    """``numPreemptibleGpus`` as the API spells it: ``num_preemptible_gpus`` (a snake_case name is kept)."""
    return _UPPER.sub("_", name).lower()


def annotation_type(annotation: str, namespace: dict[str, Any]) -> Any:
    """The value type a hand-written annotation of ours declares, in ``FieldSpec.wire_type``'s terms.

    The dataclasses of ``nested_inputs`` and ``ClusterArgs`` annotate as strings (``from __future__ import
    annotations``), and ``pulumi.Input`` cannot be evaluated by ``typing.get_type_hints``; the forms they use
    are few: ``pulumi.Input[T] | None``, ``SomeArgs | pulumi.Input[dict[str, Any]] | None``,
    ``Sequence[SomeArgs | ...] | None`` and plain ``bool | None``. Anything else is refused, naming it.
    """
    choices = [part.strip() for part in _top_level_split(annotation)]
    kept = [c for c in choices if c != "None" and c != "pulumi.Input[dict[str, Any]]"]
    if len(kept) != 1:
        raise ValueError(f"annotation {annotation!r}: expected one value type besides None and a dict")
    (choice,) = kept
    if choice.startswith("Sequence[") and choice.endswith("]"):
        return list[annotation_type(choice[len("Sequence[") : -1], namespace)]  # type: ignore[misc]
    if choice.startswith("pulumi.Input[") and choice.endswith("]"):
        choice = choice[len("pulumi.Input[") : -1]
    primitive = {"str": str, "int": int, "float": float, "bool": bool}.get(choice)
    if primitive is not None:
        return primitive
    if choice in namespace:
        return namespace[choice]
    raise ValueError(f"annotation {annotation!r}: {choice!r} is no type the package schema knows")


def _top_level_split(annotation: str) -> list[str]:
    """``annotation`` split on the ``|`` that are not inside brackets."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(annotation):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        elif char == "|" and depth == 0:
            parts.append(annotation[start:i])
            start = i + 1
    parts.append(annotation[start:])
    return parts


class _Types:
    """The schema's ``types`` section, filled as the resources' properties refer to them."""

    def __init__(self) -> None:
        self.specs: dict[str, dict[str, Any]] = {}

    def property(self, wire_type: Any) -> dict[str, Any]:
        """The property spec of a value of ``wire_type``, registering the types it refers to."""
        if wire_type in _PRIMITIVES:
            return {"type": _PRIMITIVES[wire_type]}
        if get_origin(wire_type) is list:
            (item,) = get_args(wire_type)
            return {"type": "array", "items": self.property(item)}
        if get_origin(wire_type) is dict:
            return {"type": "object", "additionalProperties": self.property(get_args(wire_type)[1])}
        if get_origin(wire_type) is Literal:
            return self._ref(_ENUM_NAMES[get_args(wire_type)], lambda: _enum_spec(get_args(wire_type)))
        if dataclasses.is_dataclass(wire_type) and isinstance(wire_type, type):
            cls = wire_type
            return self._ref(cls.__name__.removesuffix("Args"), lambda: self._object_spec(cls))
        raise TypeError(f"{wire_type!r} is no type the package schema knows")

    def _ref(self, name: str, build: Any) -> dict[str, Any]:
        token = f"{PACKAGE}:index:{name}"
        if token not in self.specs:
            self.specs[token] = {}  # claimed first: a type that refers to itself ends here
            self.specs[token] = build()
        return {"$ref": f"#/types/{token}"}

    def _object_spec(self, cls: type) -> dict[str, Any]:
        namespace = {**vars(vocabulary), **vars(nested_inputs)}
        properties: dict[str, Any] = {}
        required: list[str] = []
        for field in dataclasses.fields(cls):
            properties[camel(field.name)] = self.property(annotation_type(str(field.type), namespace))
            if field.default is dataclasses.MISSING:
                required.append(camel(field.name))
        spec: dict[str, Any] = {"type": "object", "description": _first_paragraph(cls.__doc__)}
        spec["properties"] = properties
        if required:
            spec["required"] = required
        return spec

    # --- the workload components' arguments (the dataclasses of ``components.args``) ---------------------

    def workload_property(self, hint: Any) -> dict[str, Any]:
        """The property spec of a field annotated ``hint`` in a workload's arguments (``None`` allowed or not)."""
        hint, _ = without_none(hint)
        if is_checkpoint_choice(hint):
            return self._ref(CHECKPOINT_TYPE, self._checkpoint_spec)
        if is_queue(hint):
            return {"type": "string"}
        if hint is Any:  # a trial's parameters: any JSON value
            return {"$ref": "pulumi.json#/Any"}
        if is_scalar_choice(hint):  # BatchInference's max_unavailable: 1 or "25%"
            return {"oneOf": [{"type": _PRIMITIVES[choice]} for choice in get_args(hint)]}
        if hint in _PRIMITIVES:
            return {"type": _PRIMITIVES[hint]}
        origin = get_origin(hint)
        if origin in (Mapping, dict):
            return {"type": "object", "additionalProperties": self.workload_property(get_args(hint)[1])}
        if origin in (tuple, list, Sequence):
            return {"type": "array", "items": self.workload_property(get_args(hint)[0])}
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            enum_type = hint
            return self._ref(hint.__name__, lambda: _member_enum_spec(enum_type))
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            cls = hint
            return self._ref(workload_type_name(cls), lambda: self._workload_object_spec(cls))
        raise TypeError(f"{hint!r} is no type a workload's wire arguments know")

    def workload_inputs(self, cls: type) -> tuple[dict[str, Any], list[str]]:
        """The input properties of the workload arguments ``cls`` and the required ones among them."""
        properties: dict[str, Any] = {}
        required: list[str] = []
        secrets = secret_fields(cls)
        for name, (hint, optional, has_default) in workload_fields(cls).items():
            properties[camel(name)] = self.workload_property(hint)
            if name in secrets:
                properties[camel(name)]["secret"] = True
            if not optional and not has_default:
                required.append(camel(name))
        return properties, required

    def _workload_object_spec(self, cls: type) -> dict[str, Any]:
        properties, required = self.workload_inputs(cls)
        spec: dict[str, Any] = {"type": "object", "description": _first_paragraph(cls.__doc__)}
        spec["properties"] = properties
        if required:
            spec["required"] = required
        return spec

    def _checkpoint_spec(self) -> dict[str, Any]:
        properties = {name: self.workload_property(cls) for name, cls in CHECKPOINT_CHOICES.items()}
        return {
            "type": "object",
            "description": "Where the workload keeps its checkpoints: exactly one of "
            + ", ".join(CHECKPOINT_CHOICES)
            + " (noCheckpoint says out loud that there is nothing to keep, or that the workload keeps its own).",
            "properties": properties,
        }


# --- the workload components ----------------------------------------------------------------------------

CHECKPOINT_TYPE = "Checkpoint"
CHECKPOINT_CHOICES: dict[str, type] = {
    "sharedVolume": workload_args.SharedVolume,
    "s3Bucket": workload_args.S3Bucket,
    "noCheckpoint": workload_args.NoCheckpoint,
}
"""The wire's ``checkpoint``: an object with exactly one of these, each the Python class of that choice (a
Python argument takes any one of the classes; a union of objects has no form every language reads)."""

_WORKLOAD_TYPE_NAMES: dict[type, str] = {workload_args.SharedVolume: "CheckpointVolume"}
"""A workload type whose class name a cluster's type has already (``SharedVolume``, the cluster's inline
volume), by the name the schema gives it instead."""


def workload_type_name(cls: type) -> str:
    """The schema's name of the workload argument class ``cls``."""
    return _WORKLOAD_TYPE_NAMES.get(cls, cls.__name__)


def without_none(hint: Any) -> tuple[Any, bool]:
    """``hint`` without ``None`` among its choices, and whether it had it."""
    if get_origin(hint) not in (Union, pytypes.UnionType):
        return hint, False
    choices = [c for c in get_args(hint) if c is not type(None)]
    optional = len(choices) < len(get_args(hint))
    if len(choices) == 1:
        return choices[0], optional
    return Union[tuple(choices)], optional  # noqa: UP007 (a union built from a tuple)


def is_checkpoint_choice(hint: Any) -> bool:
    """Whether ``hint`` is a choice among the checkpoint classes (``CheckpointChoice``, ``CheckpointStorage``)."""
    choices = set(get_args(hint)) if get_origin(hint) in (Union, pytypes.UnionType) else {hint}
    return len(choices) > 1 and choices <= set(CHECKPOINT_CHOICES.values())


def is_scalar_choice(hint: Any) -> bool:
    """Whether ``hint`` is a choice among scalar types (``int | str``): one of them on the wire."""
    return get_origin(hint) in (Union, pytypes.UnionType) and all(c in _PRIMITIVES for c in get_args(hint))


def is_queue(hint: Any) -> bool:
    """Whether ``hint`` is a workload's ``queue`` (a LocalQueue's name or a WorkloadQueue): a name on the wire."""
    return get_origin(hint) in (Union, pytypes.UnionType) and set(get_args(hint)) == set(
        get_args(workload_args.Queue)
    )


def workload_fields(cls: type) -> dict[str, tuple[Any, bool, bool]]:
    """Each field of the workload arguments ``cls`` (the deprecated flat keywords, ``InitVar`` s, left out): its
    type, whether it may be ``None`` and whether it has a default."""
    hints = get_type_hints(cls)
    fields: dict[str, tuple[Any, bool, bool]] = {}
    for field in dataclasses.fields(cls):
        hint, optional = without_none(field.metadata.get(workload_args.WIRE_TYPE, hints[field.name]))
        has_default = (
            field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING
        )
        fields[field.name] = (hint, optional, has_default)
    return fields


def secret_fields(cls: type) -> frozenset[str]:
    """The fields of the workload arguments ``cls`` that hold a secret (``workload_args.SECRET``)."""
    return frozenset(f.name for f in dataclasses.fields(cls) if f.metadata.get(workload_args.SECRET))


NAMES_DOC = "Kind/name of every object the component created."
THROUGH_PROVIDER = (
    "Its objects are created through the kubernetes provider given in the resource's providers option."
)


@dataclasses.dataclass(frozen=True)
class ComponentSpec:
    """A workload component served by the plugin's ``construct``: its arguments' class and its outputs."""

    args: type
    description: str
    outputs: dict[str, tuple[Any, str]]
    """Each output (snake_case): its type and description."""
    keywords: dict[str, tuple[Any, str]] = dataclasses.field(default_factory=dict)
    """Inputs the component takes as keyword arguments beside its arguments' class (snake_case): each one's
    type and description (optional on the wire: the keyword's default applies)."""
    secret_keywords: frozenset[str] = frozenset()
    """The keywords that hold a secret (a kubeconfig): ``secret`` in the schema, so every SDK keeps them so."""


COMPONENTS: dict[str, ComponentSpec] = {
    BATCH_JOB_TOKEN: ComponentSpec(
        workload_args.BatchJobArgs,
        "A run (experiment, fine-tune, eval or distillation) that survives preemption: the BatchJob of "
        "together_clusters.components, its objects checked by the preemptible placement guard at preview. Its "
        "objects are created through the kubernetes provider given in the resource's providers option.",
        {
            "job_name": (str, "The name of the Job or JobSet, as the API server has it."),
            "namespace": (str, "The namespace of the Job or JobSet."),
            "names": (list[str], NAMES_DOC),
        },
    ),
    SWEEP_TOKEN: ComponentSpec(
        workload_args.SweepArgs,
        "A hyperparameter sweep or ablation that survives preemption: the Sweep of together_clusters.components, "
        "one JobSet per trial (or one Indexed Job), checked by the preemptible placement guard at preview. "
        + THROUGH_PROVIDER,
        {
            "job_sets": (list[str], "The trials' JobSets, in trial order (empty for the Indexed Job)."),
            "job_name": (str, "The Indexed Job (absent with a JobSet per trial)."),
            "namespace": (str, "The namespace of the trials' objects."),
            "trials_config_map": (
                str,
                "The Indexed Job's ConfigMap of trials (absent with a JobSet per trial).",
            ),
            "names": (list[str], NAMES_DOC),
        },
    ),
    TRAINING_RUN_TOKEN: ComponentSpec(
        workload_args.TrainingRunArgs,
        "A distributed training run (torchrun elastic) whose workers survive preemption: the TrainingRun of "
        "together_clusters.components, its coordinator kept off preemptible nodes, checked by the preemptible "
        "placement guard at preview. " + THROUGH_PROVIDER,
        {
            "coordinator_host": (str, "The coordinator's host name, as the workers reach it."),
            "names": (list[str], NAMES_DOC),
        },
    ),
    BATCH_INFERENCE_TOKEN: ComponentSpec(
        workload_args.BatchInferenceArgs,
        "An inference Deployment that drains its requests before a preempted node goes: the BatchInference of "
        "together_clusters.components, checked by the preemptible placement guard at preview. "
        + THROUGH_PROVIDER,
        {
            "deployment_name": (str, "The name of the Deployment, as the API server has it."),
            "namespace": (str, "The namespace of the Deployment."),
            "names": (list[str], NAMES_DOC),
        },
    ),
    CHECKPOINT_STORE_TOKEN: ComponentSpec(
        workload_args.CheckpointStoreArgs,
        "Where workloads keep their checkpoints: the CheckpointStore of together_clusters.components, the "
        "PersistentVolumeClaim of a shared volume (nothing for an S3 bucket), kept on destroy unless "
        "allowDataLoss. Give the workloads the same checkpoint and dependsOn this store. " + THROUGH_PROVIDER,
        {
            "claim_name": (str, "The claim's name (absent for an S3 bucket)."),
            "names": (list[str], NAMES_DOC),
        },
        keywords={
            "volume_name": (
                str,
                "The name of a Together shared volume (a Volume's volumeName): the claim binds to the static "
                "PersistentVolume of that name the platform gives the cluster.",
            ),
            "allow_data_loss": (bool, "Delete the claim, and the checkpoints on it, with the stack."),
        },
    ),
    CLUSTER_CONTROLLERS_TOKEN: ComponentSpec(
        ClusterControllersArgs,
        "The controllers the workloads need (JobSet by default; Kueue and the descheduler on request), installed "
        "from their official charts on the cluster of the kubernetes provider given in providers, unless the "
        "cluster has them. Give the workloads on that provider dependsOn it.",
        {
            "installed": (
                dict[str, str],
                "Per controller: installed (by this stack), or what was found instead.",
            )
        },
        keywords={
            "kubeconfig": (
                str,
                "The cluster's kubeconfig (a Cluster's kubeConfig), what the component asks the cluster with: "
                "whether it has the controllers already, and, installing JobSet, whether it admits a JobSet "
                "(then the charts' Deployments and Services are done once stored, and what dependsOn the "
                "component waits for the webhooks answering). Without it the engine waits for each chart "
                "object to be ready: a provider given by reference shows the component no kubeconfig it can "
                "rely on.",
            )
        },
        secret_keywords=frozenset({"kubeconfig"}),
    ),
    REMEDIATION_GATE_TOKEN: ComponentSpec(
        workload_args.RemediationGateArgs,
        "The unattended remediation gate of one cluster: the RemediationGate of together_clusters.components, "
        "which approves the automated node repairs of the modes listed only once the node's work has "
        "checkpointed and moved (cordon, evictions through the Eviction API, then the approval through the "
        "compute API), run in the cluster on a standard node with the least it needs. " + THROUGH_PROVIDER,
        {"namespace": (str, "The gate's namespace."), "names": (list[str], NAMES_DOC)},
    ),
}


def _component(spec: ComponentSpec, types: _Types) -> dict[str, Any]:
    inputs, required_inputs = types.workload_inputs(spec.args)
    for name, (wire_type, doc) in spec.keywords.items():
        inputs[camel(name)] = {**types.workload_property(wire_type), "description": doc}
        if name in spec.secret_keywords:
            inputs[camel(name)]["secret"] = True
    properties = {
        camel(name): {**types.property(wire_type), "description": doc}
        for name, (wire_type, doc) in spec.outputs.items()
    }
    return {
        "isComponent": True,
        "description": spec.description,
        "properties": properties,
        "required": list(properties),
        "inputProperties": inputs,
        "requiredInputs": required_inputs,
    }


def _member_enum_spec(members: type[enum.Enum]) -> dict[str, Any]:
    return {
        "type": "string",
        "enum": [
            {"name": "".join(part.capitalize() for part in member.name.split("_")), "value": member.value}
            for member in members
        ],
    }


def _enum_spec(values: tuple[str, ...]) -> dict[str, Any]:
    return {"type": "string", "enum": [{"value": value} for value in values]}


def _first_paragraph(doc: str | None) -> str:
    return " ".join((doc or "").strip().split("\n\n")[0].split())


def _field_property(spec: FieldSpec, types: _Types) -> dict[str, Any]:
    prop = types.property(spec.wire_type)
    description = spec.doc + (f" Checked at preview: {spec.constraint}." if spec.constraint else "")
    if description:
        prop["description"] = description
    if spec.default is not None:
        prop["default"] = spec.default
    if spec.on_change is OnChange.REPLACE:
        prop["replaceOnChanges"] = True
    return prop


def _output_property(spec: OutputSpec, types: _Types) -> dict[str, Any]:
    prop = {**types.property(spec.wire_type), "description": spec.doc}
    if spec.secret:
        prop["secret"] = True
    return prop


def _resource(
    description: str, fields: dict[str, FieldSpec], outputs: dict[str, OutputSpec], types: _Types
) -> dict[str, Any]:
    inputs = {camel(name): _field_property(spec, types) for name, spec in fields.items()}
    properties = {camel(name): _output_property(spec, types) for name, spec in outputs.items()}
    properties.update(inputs)
    required_inputs = [camel(name) for name, spec in fields.items() if spec.required]
    always = [camel(name) for name, spec in outputs.items() if spec.always]
    return {
        "description": description,
        "properties": properties,
        "required": always + required_inputs,
        "inputProperties": inputs,
        "requiredInputs": required_inputs,
    }


def package_schema() -> dict[str, Any]:
    """The package schema, built from the tables (no version: the plugin adds its own when it serves it)."""
    types = _Types()
    resources = {
        CLUSTER_TOKEN: _resource(
            "A Together GPU cluster with standard (on-demand) and preemptible capacity.",
            FIELDS,
            OUTPUTS,
            types,
        ),
        VOLUME_TOKEN: _resource(
            "A Together shared volume, attached to a cluster by its volumeId.",
            VOLUME_FIELDS,
            VOLUME_OUTPUTS,
            types,
        ),
        **{token: _component(spec, types) for token, spec in COMPONENTS.items()},
    }
    return {
        "name": PACKAGE,
        "displayName": "Together AI GPU clusters",
        "description": "Together AI GPU clusters with preemptible capacity, as code.",
        "keywords": ["pulumi", "together", "gpu", "kubernetes", "category/cloud"],
        "config": {"variables": _PROVIDER_CONFIG},
        "provider": {
            "description": "The Together compute API the resources are made through.",
            "inputProperties": _PROVIDER_CONFIG,
        },
        "resources": resources,
        "types": dict(sorted(types.specs.items())),
    }


def rendered() -> str:
    """The schema as ``schema.json`` holds it."""
    return json.dumps(package_schema(), indent=2) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m together_clusters.provider.package_schema",
        description="Print the together package schema, or write or check provider/schema.json.",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help=f"write {SCHEMA_FILE.name} beside this module")
    mode.add_argument("--check", action="store_true", help=f"exit 1 when {SCHEMA_FILE.name} is out of date")
    args = parser.parse_args(argv)
    text = rendered()
    if args.write:
        SCHEMA_FILE.write_text(text)
        return 0
    if args.check:
        if not SCHEMA_FILE.exists() or SCHEMA_FILE.read_text() != text:
            print(
                f"{SCHEMA_FILE} does not match provider/schema.py; rewrite it with "
                "python -m together_clusters.provider.package_schema --write",
                file=sys.stderr,
            )
            return 1
        return 0
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
