"""Where the dynamic provider finds its API key and base URL, at the moment it makes a call.

Order: the stack config (``together:apiKey`` as a secret, ``together:baseUrl``), handed over by the
provider's ``configure`` hook, then ``TOGETHER_API_KEY`` / ``TOGETHER_BASE_URL``. The values live
in this module of the provider process only: never on the provider object, which the engine
pickles into the state.
"""

from __future__ import annotations

from typing import Any

from .client import TogetherClient
from .retry import RetryPolicy

_stack_config: dict[str, str] = {}

API_KEY_CONFIG = "together:apiKey"
BASE_URL_CONFIG = "together:baseUrl"


def take_stack_config(config: Any) -> None:
    """Keep what the stack config says (``config`` is a ``pulumi.dynamic.Config``-like getter)."""
    _stack_config.clear()
    for key in (API_KEY_CONFIG, BASE_URL_CONFIG):
        value = config.get(key)
        if isinstance(value, str) and value.strip():
            _stack_config[key] = value.strip()


def connect(retry: RetryPolicy | None = None) -> TogetherClient:
    """A client for one provider operation; close it (``with connect() as client``) when done."""
    return TogetherClient(
        api_key=_stack_config.get(API_KEY_CONFIG), base_url=_stack_config.get(BASE_URL_CONFIG), retry=retry
    )
