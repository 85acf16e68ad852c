"""``TogetherProvider``: the engine's calls for ``together:index:Cluster`` and ``together:index:Volume``, each
answered by the function the dynamic provider calls for it (``planning``, ``operations``,
``volume_operations``), its names and results translated by ``wire``. No rule lives here: ``diff`` takes the
change plan the dynamic provider's ``diff`` is made from (``change``), for the fields it names.

The workload components (``together:index:BatchJob``, ``Sweep``, ``TrainingRun``, ``BatchInference``,
``CheckpointStore``, ``ClusterControllers``) are answered by ``construct``: the Python component
itself, built from its own argument dataclasses (``wire.workload_args``) and registered under the schema's
token, so its rules and its placement guard refuse at preview what they refuse in a Python program. Its
Kubernetes objects go through the ``kubernetes`` provider the program gives in ``providers``.

The shared functions block (they wait for a cluster to be ready), so each runs in a worker thread: the
engine calls several resources at once, as it does the dynamic provider's pool.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from pulumi.provider.experimental.provider import (
    CheckFailure,
    CheckRequest,
    CheckResponse,
    ConfigureRequest,
    ConfigureResponse,
    ConstructRequest,
    ConstructResponse,
    CreateRequest,
    CreateResponse,
    DeleteRequest,
    DiffRequest,
    DiffResponse,
    GetSchemaRequest,
    GetSchemaResponse,
    PropertyDiff,
    PropertyDiffKind,
    Provider,
    ReadRequest,
    ReadResponse,
    UpdateRequest,
    UpdateResponse,
)
from pulumi.runtime.rpc import UNKNOWN

from .. import operations, planning, settings, volume_operations
from ..change_planning import inline_volume_at_risk
from ..errors import InputError
from ..package_schema import (
    CLUSTER_TOKEN,
    COMPONENTS,
    PACKAGE,
    SCHEMA_FILE,
    VOLUME_TOKEN,
)
from ..plan_types import ChangePlan
from ..schema import OUTPUTS, VOLUME_OUTPUTS, OutputSpec
from ..waiting import report
from .wire import (
    camel,
    from_output,
    in_schema_names,
    keyword_args,
    snake,
    to_plain,
    to_values,
    to_wire,
    workload_args,
)

DISTRIBUTION = "together-gpu-clusters"


def version() -> str:
    """The plugin's version: the installed package's."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "0.0.0"


def _cluster_may_be_deleted(state: dict[str, Any]) -> bool:
    """The Python door protects a cluster whose inline volume goes with it (``resource._keep_inline_volume``),
    so the engine refuses its destroy; the plugin cannot set ``protect``, so its delete refuses instead."""
    volume_name = inline_volume_at_risk(state)
    if volume_name is None or state.get("allow_data_loss") is True:
        return True
    raise InputError(
        "allow_data_loss",
        state.get("allow_data_loss"),
        f"cluster {state.get('cluster_id')}: its inline shared_volume {volume_name!r} is not lifecycle-independent, "
        "so deleting the cluster would delete the volume and every checkpoint on it. Nothing was deleted. Set "
        "allowDataLoss: true and run again, or keep the data on a Volume resource.",
    )


def _volume_may_be_deleted(state: dict[str, Any]) -> bool:
    """The Python door retains a volume on delete unless the code allows its data to go (``Volume``'s
    ``retain_on_delete``); the plugin cannot set that option, so its delete leaves the volume as retained."""
    if state.get("allow_data_loss") is True:
        return True
    report(
        f"volume {state.get('volume_id')} ({state.get('volume_name')}): retained, its data kept (allowDataLoss is not set)"
    )
    return False


@dataclass(frozen=True)
class Door:
    """What one resource type calls: the functions the dynamic provider calls, and its outputs."""

    check: Callable[[dict[str, Any], dict[str, Any]], Any]
    change: Callable[[dict[str, Any], dict[str, Any]], ChangePlan]
    create: Callable[[dict[str, Any]], Any]
    read: Callable[[str, dict[str, Any]], Any]
    update: Callable[[str, dict[str, Any], dict[str, Any]], Any]
    delete: Callable[[str, dict[str, Any]], None]
    may_be_deleted: Callable[[dict[str, Any]], bool]
    outputs: Mapping[str, OutputSpec]

    @property
    def secrets(self) -> tuple[str, ...]:
        """The outputs the engine keeps secret (``OutputSpec.secret``)."""
        return tuple(name for name, spec in self.outputs.items() if spec.secret)

    def planned(self, inputs: dict[str, Any], old_state: dict[str, Any] | None = None) -> dict[str, Any]:
        """The state a preview shows for a create (``old_state`` None) or an update in place: the inputs, each
        output an update keeps at its old value (``OutputSpec.kept_on_update``), every other output unknown."""
        kept = {
            name: old_state[name]
            for name, spec in self.outputs.items()
            if old_state is not None and spec.kept_on_update and name in old_state
        }
        return {**inputs, **dict.fromkeys(self.outputs, UNKNOWN), **kept}


DOORS: dict[str, Door] = {
    CLUSTER_TOKEN: Door(
        planning.check,
        planning.change,
        operations.create,
        operations.read,
        operations.update,
        operations.delete,
        _cluster_may_be_deleted,
        OUTPUTS,
    ),
    VOLUME_TOKEN: Door(
        volume_operations.check,
        volume_operations.change,
        volume_operations.create,
        volume_operations.read,
        volume_operations.update,
        volume_operations.delete,
        _volume_may_be_deleted,
        VOLUME_OUTPUTS,
    ),
}


def door(resource_type: str) -> Door:
    """The functions of ``resource_type``; a token the package does not have is refused, naming those it has."""
    try:
        return DOORS[resource_type]
    except KeyError:
        raise ValueError(f"{PACKAGE} has no resource {resource_type!r}; it has {', '.join(DOORS)}") from None


def constructed_class(token: str) -> type:
    """The Python component the schema's ``token`` names (``together:index:BatchJob``: the class ``BatchJob``
    of ``together_clusters.components.batch_job``) as the plugin constructs it: registering under that token,
    and told (where it asks, ``provider_by_reference``) that its provider may be a reference the engine read
    back from its state, as a YAML, TypeScript or Go program's is."""
    class_name = token.rsplit(":", 1)[-1]
    module = importlib.import_module(f"together_clusters.components.{snake(class_name)}")
    component = getattr(module, class_name)
    marks: dict[str, Any] = {"type_token": token}
    if hasattr(component, "provider_by_reference"):
        marks["provider_by_reference"] = True
    return type(f"Constructed{class_name}", (component,), marks)


def _constructed(token: str) -> Callable[[str, Any, Any, dict[str, Any]], Any]:
    """A constructor of :func:`constructed_class` of ``token``, imported when first constructed (the components
    need pulumi_kubernetes, the resources do not)."""

    def construct(name: str, args: Any, opts: Any, keywords: dict[str, Any]) -> Any:
        return constructed_class(token)(name, args, opts, **keywords)

    return construct


CONSTRUCTORS: dict[str, Callable[[str, Any, Any, dict[str, Any]], Any]] = {
    token: _constructed(token) for token in COMPONENTS
}
"""The Python component of each component token of the schema (``package_schema.COMPONENTS``)."""


@functools.cache
def _field_names(resource_type: str) -> frozenset[str]:
    """The snake_case names of the resource's schema properties, inputs and outputs (what its rules name)."""
    resource = json.loads(SCHEMA_FILE.read_text())["resources"][resource_type]
    return frozenset(snake(name) for part in ("inputProperties", "properties") for name in resource[part])


async def _run(function: Callable[..., Any], *args: Any) -> Any:
    return await asyncio.to_thread(function, *args)


class TogetherProvider(Provider):
    """The ``together`` provider: schema, configuration, and CRUD of clusters and volumes."""

    async def get_schema(self, request: GetSchemaRequest) -> GetSchemaResponse:
        schema = json.loads(SCHEMA_FILE.read_text())
        return GetSchemaResponse(json.dumps({**schema, "version": version()}))

    async def configure(self, request: ConfigureRequest) -> ConfigureResponse:
        # ``together:apiKey`` and ``together:baseUrl`` as the dynamic provider reads them (then the variables).
        given = to_plain(request.args)
        variables = request.variables  # the older form: ``together:config:apiKey``
        settings.take_stack_config(
            {
                key: given.get(name) or variables.get(key.replace(":", ":config:", 1))
                for key, name in (
                    (settings.API_KEY_CONFIG, "api_key"),
                    (settings.BASE_URL_CONFIG, "base_url"),
                )
            }
        )
        # No outputs or resource references as inputs: the SDK cannot unmarshal an unknown output value.
        # Previews of create and update are ours (``Door.planned``): without them the engine shows an update's
        # state as its inputs alone, every output unknown, the kubeconfig too, so a Kubernetes provider made
        # from it, and every object on it, would preview as replaced by a mere scale change.
        return ConfigureResponse(accept_secrets=True, supports_preview=True)

    async def construct(self, request: ConstructRequest) -> ConstructResponse:
        """A workload component: the Python one, its arguments from the wire, its outputs back to it."""
        token = request.resource_type
        if token not in CONSTRUCTORS:
            components = ", ".join(CONSTRUCTORS)
            raise ValueError(f"{PACKAGE} has no component {token!r}; it has {components}")
        spec = COMPONENTS[token]
        owner = f"{token.rsplit(':', 1)[-1]} {request.name!r}"  # as the Python component names itself
        values = dict(to_values(request.inputs))
        keywords = keyword_args(spec.keywords, values, owner)
        args: Any = workload_args(spec.args, values, owner)
        component = CONSTRUCTORS[token](request.name, args, request.options, keywords)
        urn = await component.urn.future()
        state = {camel(name): await from_output(getattr(component, name)) for name in spec.outputs}
        return ConstructResponse(urn, state, {})

    async def check(self, request: CheckRequest) -> CheckResponse:
        result = await _run(
            door(request.type).check, to_plain(request.old_inputs), to_plain(request.new_inputs)
        )
        return CheckResponse(
            inputs=to_wire(result.inputs),
            failures=[
                CheckFailure(camel(f.property), in_schema_names(f.reason, _field_names(request.type)))
                for f in result.failures or ()
            ],
        )

    async def diff(self, request: DiffRequest) -> DiffResponse:
        # ``old_state`` holds the old outputs, inputs among them: what the dynamic provider's diff gets too.
        plan = await _run(
            door(request.type).change, to_plain(request.old_state), to_plain(request.new_inputs)
        )
        detailed = {
            camel(name): PropertyDiff(PropertyDiffKind.UPDATE, True) for name in plan.update + plan.local
        }
        detailed |= {
            camel(name): PropertyDiff(PropertyDiffKind.UPDATE_REPLACE, True) for name in plan.replace
        }
        return DiffResponse(
            changes=plan.changed,
            replaces=[camel(name) for name in plan.replace],
            delete_before_replace=plan.delete_before_replace,
            diffs=list(detailed),
            detailed_diff=detailed,
        )

    async def create(self, request: CreateRequest) -> CreateResponse:
        resource = door(request.type)
        if request.preview:
            return CreateResponse(
                "", to_wire(resource.planned(to_plain(request.properties)), resource.secrets)
            )
        result = await _run(resource.create, to_plain(request.properties))
        return CreateResponse(result.id, to_wire(result.outs or {}, resource.secrets))

    async def read(self, request: ReadRequest) -> ReadResponse:
        """A refresh (the state given), or an import or get (the id alone): outputs and inputs both."""
        resource = door(request.type)
        state = {**to_plain(request.inputs), **to_plain(request.properties)}
        result = await _run(resource.read, request.resource_id, state)
        if not result.id:
            return ReadResponse(resource_id="", properties={}, inputs={})
        outputs = result.outs or {}
        inputs = result.inputs if result.inputs is not None else {}
        return ReadResponse(result.id, to_wire(outputs, resource.secrets), to_wire(inputs))

    async def update(self, request: UpdateRequest) -> UpdateResponse:
        resource = door(request.type)
        if request.preview:
            planned = resource.planned(to_plain(request.news), to_plain(request.olds))
            return UpdateResponse(to_wire(planned, resource.secrets))
        result = await _run(
            resource.update, request.resource_id, to_plain(request.olds), to_plain(request.news)
        )
        return UpdateResponse(to_wire(result.outs or {}, resource.secrets))

    async def delete(self, request: DeleteRequest) -> None:
        resource, state = door(request.type), to_plain(request.properties)
        if resource.may_be_deleted(state):
            await _run(resource.delete, request.resource_id, state)
