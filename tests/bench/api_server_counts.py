"""What a twin cluster's API server did, from its own metrics (``/metrics``): the writes it served, the
admission webhook calls it made and how long they took as it saw them, and its CRD conversion webhook calls.
Counters only, so the difference of two readings is what happened in between (section 8's queue figure: where
a queued trial's time goes, request by request)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from kubernetes import client

_LABELS = re.compile(r'(\w+)="([^"]*)"')
_READS = {"GET", "LIST", "WATCH"}


@dataclass(frozen=True)
class ApiServerCounts:
    writes: float
    """Requests other than reads (creates, updates, patches, applies, deletes), any code."""
    webhook_calls: float
    webhook_seconds: float
    """The admission webhook calls' total duration, as the API server timed them (the network included)."""
    conversions: float
    """CRD conversion webhook calls (Kueue's CRDs serve v1beta1 beside the stored v1beta2)."""

    def __sub__(self, other: ApiServerCounts) -> ApiServerCounts:
        return ApiServerCounts(
            self.writes - other.writes,
            self.webhook_calls - other.webhook_calls,
            self.webhook_seconds - other.webhook_seconds,
            self.conversions - other.conversions,
        )


def read(api: client.ApiClient) -> ApiServerCounts:
    """The API server's counters now."""
    headers: dict[str, str] = {}
    api.update_params_for_auth(headers, [], ["BearerToken"], "/metrics", "GET", None)
    response = api.call_api("GET", f"{api.configuration.host}/metrics", header_params=headers)
    totals: Counter[str] = Counter()
    for line in response.read().decode().splitlines():
        name, _, value = line.rpartition(" ")
        if name.startswith("apiserver_request_total{"):
            if dict(_LABELS.findall(name)).get("verb") not in _READS:
                totals["writes"] += float(value)
        elif name.startswith("apiserver_admission_webhook_admission_duration_seconds_count{"):
            totals["webhook_calls"] += float(value)
        elif name.startswith("apiserver_admission_webhook_admission_duration_seconds_sum{"):
            totals["webhook_seconds"] += float(value)
        elif name.startswith("apiserver_crd_conversion_webhook_duration_seconds_count{"):
            totals["conversions"] += float(value)
    return ApiServerCounts(
        totals["writes"], totals["webhook_calls"], totals["webhook_seconds"], totals["conversions"]
    )
