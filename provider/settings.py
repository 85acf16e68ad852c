"""Where the dynamic provider finds its API key and base URL, and the one API client of the process.

Order: the stack config (``together:apiKey`` as a secret, ``together:baseUrl``), handed over by the
provider's ``configure`` hook, then ``TOGETHER_API_KEY`` / ``TOGETHER_BASE_URL``. The values live
in this module of the provider process only: never on the provider object, which the engine
pickles into the state.

One ``TogetherClient`` (one connection pool, one ``whoami``) serves every operation of the
process for a given key and endpoint. ``TOGETHER_RECONCILE_TIMEOUT_S`` sets how long a create
whose reply was lost looks for its cluster in the listing (default: the create's own deadline).
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any

from .environment import API_KEY_ENV as API_KEY_ENV
from .environment import BASE_URL_ENV as BASE_URL_ENV

if TYPE_CHECKING:
    from .client import TogetherClient

_stack_config: dict[str, str] = {}
_clients: dict[tuple[str, str], TogetherClient] = {}
_lock = threading.Lock()

RECONCILE_TIMEOUT_ENV = "TOGETHER_RECONCILE_TIMEOUT_S"
API_KEY_CONFIG = "together:apiKey"
BASE_URL_CONFIG = "together:baseUrl"
# The stack config key the templates and examples read into a Cluster's ``adopt_cluster_id``: how a stack
# takes in a cluster it made but never recorded (a killed `pulumi up`) without a code change.
ADOPT_CONFIG_KEY = "adoptClusterId"
# The same in a stack of several clusters (examples/fleet): an object from cluster_name to the id to adopt,
# set one entry at a time (`pulumi config set --path adoptClusterIds.<cluster_name> <id>`), so adopting one
# cluster never touches another.
ADOPT_MANY_CONFIG_KEY = "adoptClusterIds"


def take_stack_config(config: Any) -> None:
    """Keep what the stack config says (``config`` is a ``pulumi.dynamic.Config``-like getter)."""
    _stack_config.clear()
    for key in (API_KEY_CONFIG, BASE_URL_CONFIG):
        value = config.get(key)
        if isinstance(value, str) and value.strip():
            _stack_config[key] = value.strip()


def connect() -> TogetherClient:
    """The process's client for the current key and endpoint (made on first use, then shared)."""
    # Imported here: ``configure`` runs at every preview, which need not load the HTTP client.
    from .client import TogetherClient, resolve_api_key, resolve_base_url

    api_key = resolve_api_key(_stack_config.get(API_KEY_CONFIG))
    base_url = resolve_base_url(_stack_config.get(BASE_URL_CONFIG))
    with _lock:
        client = _clients.get((api_key, base_url))
        if client is None:
            client = _clients[(api_key, base_url)] = TogetherClient(
                api_key=api_key, base_url=base_url, reconcile_timeout_s=_reconcile_timeout_s()
            )
        return client


def forget_clients() -> None:
    """Close and drop every shared client, as a new provider process would start (for tests)."""
    with _lock:
        for client in _clients.values():
            client.close()
        _clients.clear()


def reconcile_timeout_override() -> float | None:
    """``TOGETHER_RECONCILE_TIMEOUT_S`` when set: how long an ambiguous create looks for its cluster.

    Unset, a create looks for as long as its own deadline (``ready_timeout_minutes``) allows.
    """
    try:
        value = float(os.environ.get(RECONCILE_TIMEOUT_ENV) or 0)
    except ValueError:
        return None
    return value if value > 0 else None


def _reconcile_timeout_s() -> float:
    from .client import RECONCILE_TIMEOUT_S

    return reconcile_timeout_override() or RECONCILE_TIMEOUT_S
