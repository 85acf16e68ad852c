"""What the engine knows about one stack, gathered without writing anything (``drift``'s shell).

Three reads of the stack, at once:

1. ``preview --refresh`` through the Automation API: the engine reads every resource from the live
   API in memory, then plans the code against those live values. Its step events carry, per resource,
   the live inputs and outputs (``old``) and what the code declares (``new``). A preview writes no state.
2. ``stack export``: the state as it is, which holds what the last deployment wrote (unless a refresh
   rewrote it since), and each resource's ``modified`` time.
3. ``stack history``: when the last ``pulumi up`` ran and whether a refresh since rewrote inputs.
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

from .classify import Baseline, PlannedStep
from .workspace import engine_call

_HISTORY_PAGE = 20
# History kinds that write the state without deploying the code, and may leave live values in it.
_REWRITING_KINDS = frozenset({"refresh", "import", "resource-import"})


@dataclass(frozen=True)
class Observation:
    """Everything :func:`together_clusters.drift.classify.classify` needs about one stack."""

    deployed: dict[str, Any]
    steps: list[PlannedStep]
    baseline: Baseline


def observe(stack: auto.Stack) -> Observation:
    """Preview with refresh, export and history of ``stack``, run concurrently."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        exported = pool.submit(export, stack)
        history = pool.submit(baseline, stack)
        steps = preview_steps(stack)
        return Observation(exported.result(), steps, history.result())


def export(stack: auto.Stack) -> dict[str, Any]:
    """The stack's state as it is now."""
    deployment = engine_call(f"exporting stack {stack.name}", stack.export_stack)
    return {"version": deployment.version, "deployment": deployment.deployment or {}}


def preview_steps(stack: auto.Stack) -> list[PlannedStep]:
    """The steps of ``pulumi preview --refresh``: live (``old``) against code (``new``), per resource."""
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
        lambda: stack.preview(refresh=True, diff=False, color="never", on_event=on_event),
        errors,
    )
    return steps


def planned_step(meta: auto.StepEventMetadata) -> PlannedStep | None:
    """A step of the plan from its event; ``None`` for the refresh pass, which only reads."""
    op = str(getattr(meta.op, "value", meta.op))
    if op == "refresh":
        return None
    old, new = meta.old, meta.new
    return PlannedStep(
        urn=meta.urn,
        type=meta.type,
        op=op,
        live_inputs=_plain(old.inputs) if old is not None else None,
        live_outputs=_plain(old.outputs) if old is not None else None,
        code_inputs=_plain(new.inputs) if new is not None and op not in _CODE_LESS_OPS else None,
        diffs=tuple(str(d) for d in meta.diffs or ()),
    )


# Steps whose ``new`` is not something the code declares.
_CODE_LESS_OPS = frozenset(
    {"delete", "delete-replaced", "discard", "discard-replaced", "remove-pending-replace"}
)


def baseline(stack: auto.Stack) -> Baseline:
    """From the stack's history, newest first: the last ``up``, and refreshes since that rewrote inputs."""
    rewritten_from = None
    page = 1
    while True:
        entries = engine_call(
            f"reading the history of stack {stack.name}",
            functools.partial(stack.history, page_size=_HISTORY_PAGE, page=page, show_secrets=False),
        )
        for entry in entries:
            if entry.kind == "update":
                return Baseline(deployed=True, rewritten_from=rewritten_from)
            if entry.kind in _REWRITING_KINDS and _rewrote(entry.resource_changes):
                rewritten_from = entry.start_time.replace(tzinfo=UTC)
        if len(entries) < _HISTORY_PAGE:
            return Baseline(deployed=False)
        page += 1


def _rewrote(changes: Mapping[Any, int] | None) -> bool:
    """Whether a history entry's resource changes include more than unchanged resources."""
    counted = {str(getattr(op, "value", op)): n for op, n in (changes or {}).items()}
    return any(n for op, n in counted.items() if op != "same")


def _plain(values: Mapping[str, Any] | None) -> dict[str, Any]:
    """Event values as the state holds them: the wire has one number type, so ``8`` arrives as ``8.0``."""
    return {k: _whole(v) for k, v in (values or {}).items()}


def _whole(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _whole(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole(v) for v in value]
    return value
