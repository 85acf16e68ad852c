"""What a campaign reached (its seed, its kill points or faults, its outcome), shown at the end of every run.

A test files its report with the ``campaign_report`` fixture (tests/conftest.py): printed at once where
pytest shows a test's output (``-s``), and gathered into the run's terminal summary. Under xdist a worker's
output never reaches the terminal, so the report travels to the controller with the test's own report
(``user_properties``), and the controller prints it: CI's log always names the fresh seeds drawn and what
each reached, whether the test passed or failed.
"""

from __future__ import annotations

from typing import Any

import pytest

REPORT_PROPERTY = "campaign_report"


class ReportsPlugin:
    """Gathers the campaign reports of the run's tests (on the controller, or the only process)."""

    def __init__(self, config: pytest.Config) -> None:
        self.is_worker = hasattr(config, "workerinput")
        self.reports: list[tuple[str, str]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.is_worker or report.when != "call":
            return
        self.reports += [
            (report.nodeid, str(text)) for key, text in report.user_properties if key == REPORT_PROPERTY
        ]

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.is_worker or not self.reports:
            return
        terminalreporter.section("campaign reports")
        for nodeid, text in self.reports:
            terminalreporter.write_line(nodeid)
            for line in text.splitlines():
                terminalreporter.write_line(f"  {line}")
