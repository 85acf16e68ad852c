"""What the Volume's dynamic provider does: ``check`` and ``diff`` from the rules, ``create``, ``read``,
``update`` and ``delete`` through the client. Loaded by the provider host on the first call.
"""

from __future__ import annotations

from typing import Any

from pulumi.dynamic import CheckFailure, CheckResult, CreateResult, DiffResult, ReadResult, UpdateResult

from . import lifecycle, settings
from .client import Identity, TogetherClient
from .errors import ConflictError, InputError, NotFoundError
from .models import ClusterStorage, StorageCreateRequest
from .operations import _check_target, _identity
from .plan_types import ChangePlan
from .planning import whole_numbers
from .schema import VOLUME_FIELDS, volume_with_defaults
from .volume_rules import plan_volume_change, validate_volume

# Set by ``check`` once the adoption happened: a later replacement creates a volume, not adopts it again.
ADOPTION_DONE = "adoption_done"


def volume_inputs_of(props: dict[str, Any]) -> dict[str, Any]:
    """The Volume inputs in ``props`` (which may also hold outputs and ``__provider``)."""
    return {k: whole_numbers(v) for k, v in props.items() if k in VOLUME_FIELDS and v is not None}


def check(olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
    inputs = {k: v for k, v in volume_with_defaults(volume_inputs_of(news)).items() if v is not None}
    failures = validate_volume(inputs)
    old_inputs = volume_inputs_of(olds)
    if old_inputs and not failures:
        failures += plan_volume_change(old_inputs, inputs).refusals
    adopting = inputs.get("adopt_volume_id")
    if adopting is not None and old_inputs and adopting == old_inputs.get("adopt_volume_id"):
        inputs[ADOPTION_DONE] = True
    return CheckResult(inputs, [CheckFailure(f.field, f.message) for f in failures])


def change(olds: dict[str, Any], news: dict[str, Any]) -> ChangePlan:
    """What going from the state ``olds`` to the engine's new inputs ``news`` does (both front doors' diff)."""
    return plan_volume_change(whole_numbers(olds), volume_inputs_of(news))


def diff(id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
    plan = change(olds, news)
    return DiffResult(
        changes=plan.changed,
        replaces=plan.replace,
        delete_before_replace=plan.delete_before_replace,
    )


def _state(inputs: dict[str, Any], volume: ClusterStorage, identity: Identity) -> dict[str, Any]:
    return {
        **{k: v for k, v in volume_with_defaults(inputs).items() if v is not None},
        "volume_name": volume.volume_name,
        "size_tib": volume.size_tib,
        "volume_id": volume.volume_id,
        "status": volume.status,
        "api_endpoint": identity.endpoint,
        "api_project_id": identity.project_id,
        "api_organization_id": identity.organization_id,
    }


def create(props: dict[str, Any]) -> CreateResult:
    inputs = volume_with_defaults(volume_inputs_of(props))
    client = settings.connect()
    identity = _identity(client)
    if inputs.get("adopt_volume_id") and not props.get(ADOPTION_DONE):
        volume = _adopt(client, inputs)
    else:
        volume = client.create_volume(
            StorageCreateRequest(
                region=inputs["region"],
                size_tib=inputs["size_tib"],
                volume_name=inputs["volume_name"],
                instance_cluster_id=inputs.get("instance_cluster_id"),
                is_lifecycle_independent=inputs["is_lifecycle_independent"],
                # Sent on every create: the stack's project, else the key's own (whoami).
                project_id=inputs.get("project_id") or identity.project_id,
            )
        )
        lifecycle.report(f"volume {volume.volume_id} ({volume.volume_name}, {volume.size_tib} TiB) created")
    return CreateResult(str(volume.volume_id), _state(inputs, volume, identity))


def _adopt(client: TogetherClient, inputs: dict[str, Any]) -> ClusterStorage:
    """Take an existing volume into the stack, grown to the code's size if it is smaller."""
    volume_id = inputs["adopt_volume_id"]
    try:
        volume = client.get_volume(volume_id)
    except NotFoundError:
        raise InputError(
            "adopt_volume_id", volume_id, f"adopt_volume_id {volume_id!r}: no such volume for this API key."
        ) from None
    live = {"volume_name": volume.volume_name, "size_tib": volume.size_tib, "volume_id": volume.volume_id}
    plan = plan_volume_change(live, {k: v for k, v in inputs.items() if k in ("volume_name", "size_tib")})
    if plan.replace or plan.refusals:
        said = plan.refusals[0].message if plan.refusals else f"volume_name is {volume.volume_name!r}"
        raise InputError(
            "adopt_volume_id",
            volume_id,
            f"cannot adopt volume {volume_id}: {said}. Make the code match the volume, then adopt.",
        )
    lifecycle.report(f"adopting volume {volume_id} ({volume.volume_name})")
    if plan.update:
        volume = client.resize_volume(volume_id, inputs["size_tib"])
    return volume


def read(id_: str, props: dict[str, Any]) -> ReadResult:
    client = settings.connect()
    identity = _check_target(client, props, id_, what="volume")
    try:
        volume = client.get_volume(id_)
    except NotFoundError:
        return ReadResult("", {})
    inputs = volume_inputs_of(props) | {"volume_name": volume.volume_name, "size_tib": volume.size_tib}
    return ReadResult(id_, _state(inputs, volume, identity), inputs)


def update(id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
    inputs = volume_with_defaults(volume_inputs_of(news))
    client = settings.connect()
    identity = _check_target(client, olds, id_, what="volume")
    plan = plan_volume_change(whole_numbers(olds), inputs)
    if "size_tib" in plan.update:
        volume = client.resize_volume(id_, inputs["size_tib"])
        lifecycle.report(f"volume {id_}: grown to {volume.size_tib} TiB")
    else:
        volume = client.get_volume(id_)
    return UpdateResult(_state(inputs, volume, identity))


def delete(id_: str, props: dict[str, Any]) -> None:
    client = settings.connect()
    _check_target(client, props, id_, what="volume")
    try:
        client.delete_volume(id_)
    except NotFoundError:
        return
    except ConflictError as exc:
        exc.add_note(
            f"Volume {id_} is still attached to a cluster: delete that cluster first (a cluster of this "
            "stack is deleted before the volume it uses), then run again."
        )
        raise
