"""Suite-wide hooks: the cost table every run ends with (tests/_costs.py), and the campaigns' reports
(tests/_reports.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests._costs import CostsPlugin
from tests._reports import REPORT_PROPERTY, ReportsPlugin


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(CostsPlugin(config), "together-costs")
    config.pluginmanager.register(ReportsPlugin(config), "together-reports")


@pytest.fixture
def campaign_report(
    request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> Callable[[str], None]:
    """File a campaign's report (its seed, what it reached, its outcome): printed now under ``-s``, and shown
    in the run's summary, also under xdist (tests/_reports.py)."""

    def report(text: str) -> None:
        request.node.user_properties.append((REPORT_PROPERTY, text))
        with capsys.disabled():
            print(f"\n{text}")

    return report
