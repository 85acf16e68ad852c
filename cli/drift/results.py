"""The outcome of checking one stack, and of checking several. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..exit_codes import DRIFT_SEVERITY, ExitCode
from .classify import DriftReport


@dataclass(frozen=True)
class StackResult:
    """One stack's check: its report, or the one-line cause of its failure."""

    stack: str
    report: DriftReport | None
    error: str | None = None
    seconds: float = 0.0

    def exit_code(self, fail_on_pending: bool, fail_on_stalled: bool = False) -> ExitCode:
        if self.report is None:
            return ExitCode.ERROR
        return self.report.exit_code(fail_on_pending, fail_on_stalled)

    @property
    def verdict(self) -> str:
        """``error``, ``drift``, ``changes pending`` or ``in sync``."""
        if self.report is None:
            return "error"
        if not self.report.in_sync:
            return "drift"
        return "changes pending" if self.report.pending else "in sync"


def worst_exit_code(codes: Iterable[int]) -> ExitCode:
    """The exit code of several checks: error over drift over pending over stalled over in sync
    (``exit_codes.DRIFT_SEVERITY``)."""
    found = set(codes)
    return next((code for code in DRIFT_SEVERITY if code in found), ExitCode.OK)


def fleet_exit_code(
    results: Sequence[StackResult], fail_on_pending: bool, fail_on_stalled: bool = False
) -> ExitCode:
    return worst_exit_code(r.exit_code(fail_on_pending, fail_on_stalled) for r in results)
