"""Suite-wide hooks: the cost table every run ends with (tests/_costs.py)."""

from __future__ import annotations

import pytest

from tests._costs import CostsPlugin


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(CostsPlugin(config), "together-costs")
