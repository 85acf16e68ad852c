"""Check several stacks of one project at once: one result per stack, in the order asked (shell).

Each check is mostly waiting on its own engine process, so threads run them side by side. A failure
of one stack (unknown stack, API down, wrong passphrase) is that stack's result, never the others'.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TextIO

from pulumi import automation as auto

from ..workspace import EngineError, StackInPlace
from .classify import classify
from .observe import observe
from .results import StackResult
from .workload_check import stalled_and_unread


def check_stack(workspace: auto.LocalWorkspace, name: str) -> StackResult:
    started = time.monotonic()
    try:
        stack = StackInPlace(name, workspace)
        seen = observe(stack)
        report = classify(seen.deployed, seen.steps, seen.baseline)
        stalled, unread = stalled_and_unread(stack, seen.deployed)
        report.stalled.extend(stalled)
        report.workloads_unread.extend(unread)
        return StackResult(name, report, None, time.monotonic() - started)
    except (EngineError, OSError) as exc:
        return StackResult(name, None, str(exc), time.monotonic() - started)
    except Exception as exc:  # one stack's surprise must not hide the other stacks' reports
        cause = " ".join(f"{type(exc).__name__}: {exc}".split())
        return StackResult(name, None, f"checking stack {name} failed: {cause}", time.monotonic() - started)


def check_fleet(
    workspace: auto.LocalWorkspace,
    names: Sequence[str],
    *,
    jobs: int,
    progress: TextIO | None = sys.stderr,
) -> list[StackResult]:
    """Every stack's result, ``jobs`` at a time; progress (one line per finished stack) to ``progress``."""

    def one(name: str) -> StackResult:
        result = check_stack(workspace, name)
        if progress is not None:
            said = f"error: {result.error}" if result.error else result.verdict
            progress.write(f"together-clusters drift: {name}: {said} ({result.seconds:.1f}s)\n")
            progress.flush()
        return result

    if progress is not None:
        progress.write(f"together-clusters drift: checking {', '.join(names)}\n")
        progress.flush()
    with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(names)))) as pool:
        return list(pool.map(one, names))
