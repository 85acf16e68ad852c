"""Who sent a twin cluster's API server which requests, from its audit log (the twin's ``--audit-log``: one JSON
event per request, level Metadata, written once its response is sent). Section 10 counts, request by request,
what a workload through the fleet costs each cluster's API server and which client sent it.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

# A client is its user and the program its user agent names (``kueue/v0.17.0 (linux/amd64) ...`` is Kueue,
# ``Python-urllib/3.12`` the fleet's dispatcher).
Client = tuple[str, str]


def audit_logs(emulator_url: str, names: dict[str, str]) -> dict[str, Path]:
    """Each cluster's audit log by the name ``names`` gives its cluster id (``{cluster_id: name}``)."""
    status = httpx.get(f"{emulator_url}/_emulator/kubernetes", timeout=30).json()
    return {
        names[plane["cluster_id"]]: Path(plane["audit_log"])
        for plane in status["control_planes"]
        if plane["cluster_id"] in names and plane["audit_log"]
    }


def client_of(event: dict[str, Any]) -> Client:
    user = str((event.get("user") or {}).get("username", "?"))
    agent = str(event.get("userAgent", "?")).split("/", 1)[0]
    return user, agent


Request = tuple[Client, str, str]
"""A request's client, verb and resource (``jobsets``, ``workloads/status``)."""


def requests_within(log: Path, windows: dict[str, list[tuple[float, float]]]) -> dict[str, Counter[Request]]:
    """The requests the API server answered within each named window's spans (epoch seconds), read in one pass
    over the log. Watches count once, when they end, so they are left out."""
    found: dict[str, Counter[Request]] = {name: Counter() for name in windows}
    with log.open() as lines:
        for line in lines:
            event = json.loads(line)
            verb = event.get("verb", "?")
            if verb == "watch":
                continue
            at = datetime.fromisoformat(event["stageTimestamp"].replace("Z", "+00:00")).timestamp()
            names = [
                name for name, spans in windows.items() if any(since <= at <= until for since, until in spans)
            ]
            if not names:
                continue
            ref = event.get("objectRef") or {}
            resource = str(ref.get("resource", "?")) + (
                f"/{ref['subresource']}" if ref.get("subresource") else ""
            )
            for name in names:
                found[name][(client_of(event), verb, resource)] += 1
    return found


def by_client(counts: Counter[Request]) -> Counter[Client]:
    totals: Counter[Client] = Counter()
    for (who, _, _), n in counts.items():
        totals[who] += n
    return totals
