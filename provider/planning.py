"""What the dynamic provider's ``check`` and ``diff`` do: the rules applied to the engine's inputs, and the
region catalog looked up once per provider process when a changed field needs it.

Loaded by the provider host on the first ``check``: a preview of unchanged clusters loads neither
pydantic nor the HTTP client (the catalog lookup imports the client only when it runs).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from pulumi.dynamic import CheckFailure, CheckResult, ConfigureRequest, DiffResult

from . import settings
from .catalog_rules import (
    catalog_fields_to_check,
    default_driver,
    has_driver_selector,
    missing_driver_failure,
    validate_against_catalog,
)
from .change_planning import plan_change
from .errors import AuthenticationError, TogetherError, TransportError, UnreadableReplyError
from .plan_types import ChangePlan, is_unknown
from .schema import FIELDS, with_defaults
from .validation import validate
from .waiting import report

if TYPE_CHECKING:
    from .models import Region

# Set by ``check`` on the inputs of a resource whose adoption already happened: a later replacement
# creates a new cluster instead of adopting the one it has just deleted.
ADOPTION_DONE = "adoption_done"
# The preview-time catalog lookup: one try, bounded, made once per provider process.
CATALOG_TIMEOUT_S = 2.0


def inputs_of(props: dict[str, Any]) -> dict[str, Any]:
    """The resource inputs in ``props`` (which may also hold outputs and ``__provider``)."""
    return {k: whole_numbers(v) for k, v in props.items() if k in FIELDS and v is not None}


def whole_numbers(value: Any) -> Any:
    """The engine's wire format has one number type, so ``8`` arrives as ``8.0``: make it ``8`` again."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: whole_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [whole_numbers(v) for v in value]
    return value


# Per endpoint and key: the catalog, and why it could not be read (None when it was).
_catalogs: dict[tuple[str, str], tuple[list[Region], str | None]] = {}
_catalog_lock = threading.Lock()


def _region_catalog() -> tuple[list[Region], str | None]:
    """What the API offers, for checks at preview, and why it is empty (checks skipped) when it cannot be
    asked now.

    One bounded try, once per provider process (every resource of a preview shares it): the API
    validates the same choices again at create, so an unreachable API must not slow a preview down.
    """
    try:
        client = settings.connect()
    except TogetherError as exc:  # no API key, or a base URL that is not one: the message names the fix
        return [], str(exc).rstrip(".")
    key = (client.base_url, client.api_key_fingerprint)
    with _catalog_lock:
        if key not in _catalogs:
            try:
                _catalogs[key] = (client.list_regions(attempts=1, timeout_s=CATALOG_TIMEOUT_S), None)
            except TogetherError as exc:
                _catalogs[key] = ([], why_unread(exc, client.base_url))
        return _catalogs[key]


def why_unread(error: TogetherError, base_url: str) -> str:
    """One clause: why the API could not be asked, and the variable or config key that fixes it."""
    if isinstance(error, AuthenticationError):
        return (
            f"the API at {base_url} refused the API key (HTTP {error.status_code}: {error.message}): set a "
            f"valid key in {settings.API_KEY_ENV} or `pulumi config set --secret {settings.API_KEY_CONFIG} <key>`"
        )
    if isinstance(error, TransportError) and not isinstance(error, UnreadableReplyError):
        return (
            f"the API at {base_url} could not be reached ({error}): check {settings.BASE_URL_ENV} or "
            f"`pulumi config set {settings.BASE_URL_CONFIG} <url>`"
        )
    return f"the API at {base_url} could not list its regions ({error})"


def forget_catalog() -> None:
    """Drop the cached catalog, as a new provider process would (for tests)."""
    with _catalog_lock:
        _catalogs.clear()


def configure(req: ConfigureRequest) -> None:
    settings.take_stack_config(req.config)


def check(olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
    inputs: dict[str, Any] = {k: v for k, v in with_defaults(inputs_of(news)).items() if v is not None}
    failures = validate(inputs)
    old_inputs = inputs_of(olds)
    replaces = False
    if old_inputs and not failures:
        plan = plan_change(old_inputs, inputs)
        failures += plan.refusals
        replaces = bool(plan.replace)
    adopting = inputs.get("adopt_cluster_id")
    if adopting is not None and old_inputs and adopting == old_inputs.get("adopt_cluster_id"):
        # ``olds`` are the resource's previous inputs: it exists, and this adoption already happened.
        inputs[ADOPTION_DONE] = True
    new_cluster = not old_inputs or replaces
    if not new_cluster and not has_driver_selector(inputs) and old_inputs.get("nvidia_version_id"):
        # The driver the first check resolved (the region's newest) stays the cluster's: carried forward,
        # a later diff does not show it as removed.
        inputs["nvidia_version_id"] = old_inputs["nvidia_version_id"]
    needs_driver = (
        new_cluster
        and adopting is None
        and not has_driver_selector(inputs)
        and not is_unknown(inputs.get("region"))
    )
    fields = catalog_fields_to_check(old_inputs, inputs)
    if not failures and (fields or needs_driver):
        catalog, unread_because = _region_catalog()
        failures += validate_against_catalog(inputs, catalog, fields)
        if needs_driver and not failures:
            driver = default_driver(catalog, inputs.get("region"))
            if driver is None:
                failures.append(missing_driver_failure(inputs.get("region"), unread_because))
            else:
                inputs["nvidia_version_id"] = driver.id
                report(
                    f"{inputs.get('cluster_name')}: no driver chosen; using the region's newest, "
                    f"nvidia_version_id={driver.id!r} (CUDA {driver.cuda_version}, driver "
                    f"{driver.nvidia_driver_version}). Set nvidia_version_id to choose."
                )
    return CheckResult(inputs, [CheckFailure(f.field, f.message) for f in failures])


def change(olds: dict[str, Any], news: dict[str, Any]) -> ChangePlan:
    """What going from the state ``olds`` to the engine's new inputs ``news`` does (both front doors' diff)."""
    return plan_change(olds, inputs_of(news))


def diff(id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
    plan = change(olds, news)
    return DiffResult(
        changes=plan.changed,
        replaces=plan.replace,
        delete_before_replace=plan.delete_before_replace,
    )
