"""How the dispatcher writes a workload's worker (pure): the server-side apply it sends.

Kueue v0.17.0 keeps ``status.clusterName`` and ``status.nominatedClusterNames`` mutually exclusive (a
validation of the Workload CRD), and when a worker admits the workload MultiKueue sets the first and clears the
second in one server-side apply under its field manager ``kueue-admission``. An apply clears only a field its
own manager holds: a list the dispatcher owned under another name would stay, and every such apply would be
refused ("clusterName and nominatedClusterNames are mutually exclusive"), leaving the workload running in the
worker but never marked admitted on the manager (seen on the twin).

So the dispatcher writes the list as Kueue's own admission does, which is also how Kueue's integration test of
the External mode nominates (``workload.PatchAdmissionStatus``): a forced apply under ``kueue-admission`` whose
body is every field that manager already holds, as they are now (read from the Workload's ``managedFields``),
plus the list. Leaving one out would make the apply remove it; carrying the ``resourceVersion`` makes the API
server refuse the apply (409) if the Workload changed since it was read, so nothing Kueue wrote in between is
undone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .plan import COPY_ADMITTED, COPY_RELEASED, Prompt, being_evicted

ADMISSION_MANAGER = "kueue-admission"
"""The field manager of Kueue's admission status writes (``constants.AdmissionName``)."""
PROMPT_MANAGER = "together-fleet-dispatcher"
"""The field manager of the dispatcher's own condition (:data:`PROMPT_CONDITION`), apart from Kueue's fields."""
PROMPT_CONDITION = "together.ai/FleetWorkerCopy"
"""The condition the dispatcher writes on a manager's Workload when a worker's copy of it changed in a way
MultiKueue must act on (:func:`.plan.prompt_for`): any change of the manager's Workload has MultiKueue reconcile
it at once. Its reason says what changed, its message where; Kueue reads no condition of this type."""


def owned_fields(value: Any, fields: Mapping[str, Any]) -> Any:
    """The parts of ``value`` a ``managedFields`` entry's ``fieldsV1`` tree names (``f:`` a field, ``k:`` a
    list item by its keys, ``v:`` a set item, ``.`` the node itself); a leaf is taken whole."""
    if not fields:
        return value  # a leaf: the whole value
    if set(fields) == {"."}:
        return {} if isinstance(value, Mapping) else value  # the node, none of its fields
    if isinstance(value, Mapping):
        found: dict[str, Any] = {}
        for path, sub in fields.items():
            if path.startswith("f:") and path[2:] in value:
                found[path[2:]] = owned_fields(value[path[2:]], sub)
        return found
    if isinstance(value, list):
        items = []
        for path, sub in fields.items():
            if path.startswith("k:"):
                keys = json.loads(path[2:])
                match = next((i for i in value if all(i.get(k) == v for k, v in keys.items())), None)
                if match is not None:
                    items.append({**keys, **owned_fields(match, sub)})
            elif path.startswith("v:"):
                items.append(json.loads(path[2:]))
        return items
    return value


def _admission_status(workload: Mapping[str, Any]) -> dict[str, Any] | None:
    """Every status field :data:`ADMISSION_MANAGER` holds, as it is; None when it holds none yet."""
    meta = workload["metadata"]
    entry = next(
        (
            m
            for m in meta.get("managedFields") or []
            if m.get("manager") == ADMISSION_MANAGER
            and m.get("operation") == "Apply"
            and m.get("subresource") == "status"
        ),
        None,
    )
    if entry is None:
        return None
    held = (entry.get("fieldsV1") or {}).get("f:status") or {}
    found = owned_fields(workload.get("status") or {}, held)
    return dict(found) if isinstance(found, Mapping) else {}


def _apply_of(workload: Mapping[str, Any], status: Mapping[str, Any], api_version: str) -> dict[str, Any]:
    meta = workload["metadata"]
    return {
        "apiVersion": api_version,
        "kind": "Workload",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "resourceVersion": meta["resourceVersion"],
        },
        "status": status,
    }


def nomination_apply(
    workload: Mapping[str, Any], clusters: Sequence[str], api_version: str
) -> dict[str, Any] | None:
    """The apply that sets ``workload``'s ``status.nominatedClusterNames`` to ``clusters``, under
    :data:`ADMISSION_MANAGER`; None when that manager holds none of its status yet (no quota reserved)."""
    status = _admission_status(workload)
    if status is None:
        return None
    status["nominatedClusterNames"] = list(clusters)
    return _apply_of(workload, status, api_version)


def retry_apply(
    workload: Mapping[str, Any], admission_check: str, message: str, now: str, api_version: str
) -> dict[str, Any] | None:
    """The apply that sets the fleet's admission check of a workload a worker runs to ``Retry``: what
    MultiKueue v0.17.0 itself writes when the worker evicts the workload (``MultiKueueRedoAdmissionOnEvictionInWorker``,
    under :data:`ADMISSION_MANAGER`). The manager's Kueue then evicts it (reason ``AdmissionCheck``, no requeue
    backoff), MultiKueue has the worker's copy deactivated and removed, and the workload waits for a worker
    again. ``now``: the transition's time (RFC 3339). None when that manager holds none of its status, the
    workload has no such check, or Kueue is evicting it already (:func:`.plan.being_evicted`: a ``Retry`` then is
    never reset, and the workload would wait for ever)."""
    if being_evicted(workload):
        return None
    status = _admission_status(workload)
    current = next(
        (
            c
            for c in (workload.get("status") or {}).get("admissionChecks") or []
            if c.get("name") == admission_check
        ),
        None,
    )
    if status is None or current is None:
        return None
    check = {**current, "state": "Retry", "message": message, "lastTransitionTime": now}
    held = [c for c in status.get("admissionChecks") or [] if c.get("name") != admission_check]
    status["admissionChecks"] = [*held, check]
    return _apply_of(workload, status, api_version)


def prompt_apply(workload: Mapping[str, Any], prompt: Prompt, now: str, api_version: str) -> dict[str, Any]:
    """The apply, under :data:`PROMPT_MANAGER`, of :data:`PROMPT_CONDITION` on ``workload``'s status, saying what
    changed in which worker (and at which ``resourceVersion`` there, so each change is a change here too).
    It carries no ``resourceVersion``: the condition is the dispatcher's own and no other writer's field."""
    meta = workload["metadata"]
    what = {COPY_RELEASED: "released its quota there", COPY_ADMITTED: "was admitted there"}[prompt.reason]
    condition = {
        "type": PROMPT_CONDITION,
        "status": "True",
        "reason": prompt.reason,
        "message": f"its copy in {prompt.worker} {what} (resourceVersion {prompt.copy_version})",
        "lastTransitionTime": now,
    }
    return {
        "apiVersion": api_version,
        "kind": "Workload",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
        "status": {"conditions": [condition]},
    }
