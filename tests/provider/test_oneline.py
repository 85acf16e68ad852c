"""An expected error reaches the user as one line; a bug keeps its traceback (the SDK host's report)."""

from __future__ import annotations

import traceback
import types

from together_clusters.errors import TogetherError
from together_clusters.provider import oneline


def _host() -> types.ModuleType:
    """A stand-in for ``pulumi.dynamic.__main__``: it reports a call's exception with ``traceback.format_exc``."""
    host = types.ModuleType("host")
    host.traceback = traceback  # type: ignore[attr-defined]
    host._abort_with_traceback = lambda fn: fn  # type: ignore[attr-defined]
    return host


def _report(host: types.ModuleType, error: Exception) -> str:
    try:
        raise error
    except Exception:  # noqa: BLE001 - as the host catches every exception
        return str(host.traceback.format_exc())  # type: ignore[attr-defined]


def test_an_expected_error_is_one_line_and_a_bug_keeps_its_traceback() -> None:
    host = _host()
    oneline.install(host)
    oneline.install(host)  # a second call changes nothing
    assert _report(host, TogetherError("no API key:\n set TOGETHER_API_KEY")) == (
        "TogetherError: no API key: set TOGETHER_API_KEY"
    )
    bug = _report(host, KeyError("nvidia_version_id"))
    assert bug.startswith("Traceback (most recent call last):") and "KeyError" in bug


def test_outside_the_provider_host_nothing_is_changed() -> None:
    plain = types.ModuleType("program")
    plain.traceback = traceback  # type: ignore[attr-defined]
    oneline.install(plain)
    assert plain.traceback is traceback  # type: ignore[attr-defined]


def test_a_refused_key_and_an_unreachable_api_name_the_setting_to_change() -> None:
    from together_clusters.errors import AuthenticationError, TransportError

    refused = oneline.one_line(AuthenticationError("invalid API key", status_code=401))
    assert refused.startswith("AuthenticationError: Together API error 401: invalid API key (set a valid key")
    assert "TOGETHER_API_KEY" in refused and "together:apiKey" in refused
    down = oneline.one_line(TransportError("POST http://127.0.0.1:9/v1/compute/clusters failed: refused"))
    assert down.endswith("(check TOGETHER_BASE_URL or `pulumi config set together:baseUrl <url>`)")
