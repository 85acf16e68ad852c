"""An httpx client for Together's GPU cluster API: ``TogetherClient``, one object over the API's three families
of calls, each in a module of its own on one HTTP session (``api_session``: auth, timeouts, retries, the error
of each status):

- ``cluster_calls``: the clusters and the regions; a create is made exactly once, found by name after a lost
  reply;
- ``storage_calls``: the shared volumes;
- ``remediation_calls``: the node remediations, with their approval and rejection.

Nothing here knows about Pulumi. One ``TogetherClient`` holds one connection pool; use it as a context manager
or call ``close()``.
"""

from __future__ import annotations

from .api_session import DEFAULT_BASE_URL as DEFAULT_BASE_URL
from .api_session import DEFAULT_TIMEOUT as DEFAULT_TIMEOUT
from .api_session import RECONCILE_TIMEOUT_S as RECONCILE_TIMEOUT_S
from .api_session import Identity as Identity
from .api_session import parse as parse
from .api_session import resolve_api_key as resolve_api_key
from .api_session import resolve_base_url as resolve_base_url
from .cluster_calls import NAMES_SNAPSHOT_TTL_S as NAMES_SNAPSHOT_TTL_S
from .cluster_calls import ClusterCalls
from .remediation_calls import RemediationCalls
from .storage_calls import VOLUMES_PATH as VOLUMES_PATH
from .storage_calls import StorageCalls
from .vocabulary import ACTIVE_REMEDIATION_STATES as ACTIVE_REMEDIATION_STATES


class TogetherClient(ClusterCalls, StorageCalls, RemediationCalls):
    """Client for ``/v1/compute/clusters`` (with its shared volumes and node remediations) and
    ``/v1/compute/regions``.

    ``api_key`` defaults to ``TOGETHER_API_KEY`` and ``base_url`` to ``TOGETHER_BASE_URL`` (else
    the public API). ``transport`` is for tests that must not touch the network; ``sleep`` and
    ``rng`` make the retry waits observable.
    """
