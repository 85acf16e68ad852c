"""What the engine knows about one stack, gathered without writing anything (``drift``'s shell).

Three reads of the stack, at once:

1. ``preview --refresh`` through the Automation API: the engine reads every resource from the live
   API in memory, then plans the code against those live values. Its step events carry, per resource,
   the live inputs and outputs (``old``) and what the code declares (``new``). A preview writes no state.
2. ``stack export``: the state as it is, which holds what the last deployment wrote (unless a refresh
   rewrote it since), and each resource's ``modified`` time.
3. ``stack history``: what ran when, to tell whether each resource's state is still what the last
   ``pulumi up`` wrote (``together_clusters.cli.drift.baseline``).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC
from typing import Any

from pulumi import automation as auto

from together_clusters.provider.planning import whole_numbers

from ..stack_state import in_rule_names, managed_resources, rule_name
from ..workspace import engine_call, export
from .baseline import Baseline, HistoryEntry, reaches_back
from .classify import PlannedStep

_HISTORY_PAGE = 20


@dataclass(frozen=True)
class Observation:
    """Everything :func:`together_clusters.cli.drift.classify.classify` needs about one stack."""

    deployed: dict[str, Any]
    steps: list[PlannedStep]
    baseline: Baseline


def observe(stack: auto.Stack) -> Observation:
    """The export of ``stack``, then its preview with refresh and meanwhile its history."""
    state = export(stack)
    with ThreadPoolExecutor(max_workers=1) as pool:
        beside = pool.submit(history, stack, state)
        steps = preview_steps(stack, exclude=rendered_urns(state))
        return Observation(state, steps, beside.result())


def rendered_urns(state: Mapping[str, Any]) -> list[str]:
    """The resources whose Kubernetes provider only writes YAML files (``renderYamlToDirectory``: the
    templates' ``renderYamlTo``): on no cluster, so nothing can refresh them (pulumi-kubernetes fails the
    whole preview with "unreachable cluster") and nothing live can have drifted from them. Left out of the
    preview, as ``pulumi refresh --exclude '**kubernetes:**'`` leaves them out for a user."""
    resources = (state.get("deployment") or {}).get("resources") or []
    renderers = {
        f"{r['urn']}::{r.get('id', '')}"
        for r in resources
        if str(r.get("type", "")).startswith("pulumi:providers:kubernetes")
        and (r.get("inputs") or {}).get("renderYamlToDirectory")
    }
    return [r["urn"] for r in resources if r.get("provider") in renderers]


def preview_steps(stack: auto.Stack, exclude: list[str] | None = None) -> list[PlannedStep]:
    """The steps of ``pulumi preview --refresh``: live (``old``) against code (``new``), per resource
    (``exclude``: URNs left out of both)."""
    steps: list[PlannedStep] = []
    errors: list[str] = []
    lock = threading.Lock()

    def on_event(event: auto.EngineEvent) -> None:
        with lock:
            if event.diagnostic_event is not None and event.diagnostic_event.severity == "error":
                errors.append(event.diagnostic_event.message)
            pre = event.resource_pre_event
            if pre is not None and pre.metadata is not None:
                step = planned_step(pre.metadata)
                if step is not None:
                    steps.append(step)

    engine_call(
        f"`pulumi preview --refresh` of stack {stack.name}",
        lambda: stack.preview(
            refresh=True, diff=False, color="never", on_event=on_event, exclude=exclude or None
        ),
        errors,
    )
    return steps


def planned_step(meta: auto.StepEventMetadata) -> PlannedStep | None:
    """A step of the plan from its event; ``None`` for the refresh pass, which only reads."""
    op = str(getattr(meta.op, "value", meta.op))
    if op == "refresh":
        return None
    old, new, kind = meta.old, meta.new, meta.type

    def plain(values: Any) -> dict[str, Any]:
        return in_rule_names(kind, _plain(values))

    return PlannedStep(
        urn=meta.urn,
        type=kind,
        op=op,
        live_inputs=plain(old.inputs) if old is not None else None,
        live_outputs=plain(old.outputs) if old is not None else None,
        code_inputs=plain(new.inputs) if new is not None and op not in _CODE_LESS_OPS else None,
        diffs=tuple(rule_name(kind, str(d)) for d in meta.diffs or ()),
    )


# Steps whose ``new`` is not something the code declares.
_CODE_LESS_OPS = frozenset(
    {"delete", "delete-replaced", "discard", "discard-replaced", "remove-pending-replace"}
)


def history(stack: auto.Stack, state: Mapping[str, Any]) -> Baseline:
    """The history back to the last ``up`` and to the oldest resource's last change in ``state``."""
    stamps = [r.modified for r in managed_resources(state) if r.modified is not None]
    oldest = min(stamps) if stamps else None
    entries: list[HistoryEntry] = []
    page = 1
    while True:
        summaries = engine_call(
            f"reading the history of stack {stack.name}",
            functools.partial(stack.history, page_size=_HISTORY_PAGE, page=page, show_secrets=False),
        )
        entries += [history_entry(s) for s in summaries]
        if len(summaries) < _HISTORY_PAGE or reaches_back(entries, oldest):
            return Baseline(tuple(entries))
        page += 1


def history_entry(summary: auto.UpdateSummary) -> HistoryEntry:
    counted = {str(getattr(op, "value", op)): n for op, n in (summary.resource_changes or {}).items()}
    end = summary.end_time.replace(tzinfo=UTC) if summary.end_time is not None else None
    return HistoryEntry(
        kind=summary.kind,
        start=summary.start_time.replace(tzinfo=UTC),
        end=end,
        changed=any(n for op, n in counted.items() if op != "same"),
    )


def _plain(values: Mapping[str, Any] | None) -> dict[str, Any]:
    """Event values as the state holds them: the wire has one number type, so ``8`` arrives as ``8.0``."""
    return {k: whole_numbers(v) for k, v in (values or {}).items()}
