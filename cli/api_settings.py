"""Which API key and endpoint ``status`` uses for a stack's clusters: those the provider uses. Pure.

The provider reads the stack config (``together:apiKey``, ``together:baseUrl``) and falls back to
``TOGETHER_API_KEY`` / ``TOGETHER_BASE_URL`` (the client does the falling back on ``None``). A cluster
whose state records the endpoint it was created on is read from that endpoint.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from together_clusters.provider.settings import API_KEY_CONFIG, BASE_URL_CONFIG

from .stack_state import StateResource

# The output in which the provider records the endpoint a cluster was created on (when it does).
RECORDED_ENDPOINT = "api_endpoint"
# ... and the project (``status`` refuses a key of another project, which cannot see the cluster).
RECORDED_PROJECT = "api_project_id"


@dataclass(frozen=True)
class ApiSettings:
    """``None`` means: as the environment says."""

    api_key: str | None
    base_url: str | None

    def __repr__(self) -> str:
        key = "<redacted>" if self.api_key else None
        return f"ApiSettings(api_key={key}, base_url={self.base_url!r})"


def from_stack_config(config: Mapping[str, Any]) -> ApiSettings:
    """The key and endpoint of a stack's config (values as ``auto.ConfigValue`` or plain strings)."""
    return ApiSettings(_text(config.get(API_KEY_CONFIG)), _text(config.get(BASE_URL_CONFIG)))


def for_cluster(resource: StateResource, stack: ApiSettings) -> ApiSettings:
    """The settings to read one cluster with: its recorded endpoint wins over the stack's."""
    recorded = _text(resource.outputs.get(RECORDED_ENDPOINT))
    return ApiSettings(stack.api_key, recorded or stack.base_url)


def _text(value: Any) -> str | None:
    value = getattr(value, "value", value)
    return value.strip() if isinstance(value, str) and value.strip() else None
