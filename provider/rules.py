"""The platform's rules for Cluster inputs, and how a change is carried out: one surface over the modules that
hold them, each pure (plain dicts in, plain answers out, no I/O).

- ``validation``: ``validate`` answers "may these inputs exist?";
- ``change_planning``: ``plan_change`` answers "what does going from the old inputs to the new ones do:
  nothing, an in-place update, a replacement, or something the platform refuses?";
- ``catalog_rules``: the checks that need the region catalog, and a region's default driver;
- ``plan_types``: what they answer (``Failure``, ``ChangePlan``), shared with ``volume_rules``.

The dynamic provider's ``check`` and ``diff`` call these at preview time, so a bad plan fails before anything
is spent. Every message names the field, the value and the fix. Values unknown at preview (outputs of
resources not yet created) are skipped by ``validate`` and treated as "will change" by ``plan_change``; the
engine calls ``check`` again once they are known.
"""

from __future__ import annotations

from .catalog_rules import (
    catalog_fields_to_check,
    default_driver,
    has_driver_selector,
    missing_driver_failure,
    validate_against_catalog,
)
from .change_planning import (
    changes_by_effect,
    conversion_refusals,
    inline_volume_at_risk,
    inline_volume_loss,
    normalize,
    plan_change,
)
from .plan_types import ChangePlan, Failure, is_int, is_unknown, parse_time
from .validation import validate

__all__ = [
    "ChangePlan",
    "Failure",
    "catalog_fields_to_check",
    "changes_by_effect",
    "conversion_refusals",
    "default_driver",
    "has_driver_selector",
    "inline_volume_at_risk",
    "inline_volume_loss",
    "is_int",
    "is_unknown",
    "missing_driver_failure",
    "normalize",
    "parse_time",
    "plan_change",
    "validate",
    "validate_against_catalog",
]
