"""drift.engine.failure_summary on real engine output: the cause first, the noise left out."""

from __future__ import annotations

from together_clusters.drift.engine import failure_summary

REFRESH_API_DOWN = """\
Refreshing (dev):
~  pulumi-python:dynamic/together_clusters:Cluster quickstart refreshing (11s) error: Traceback (most recent call last):
~  pulumi-python:dynamic/together_clusters:Cluster quickstart **refreshing failed** error: Traceback (most recent call last):
    pulumi:pulumi:Stack together-quickstart-dev running error: update failed
    pulumi:pulumi:Stack together-quickstart-dev **failed** 1 error
Diagnostics:
  pulumi-python:dynamic/together_clusters:Cluster (quickstart):
    error: Traceback (most recent call last):
      File "/work/main/provider/client.py", line 255, in _send_once
        raise errors.TransportError(f"{method} {self.base_url}{path} failed: {exc}") from None
    provider.errors.TransportError: GET http://127.0.0.1:1/v1/compute/clusters/c-1 failed: [Errno 111] Connection refused

  pulumi:pulumi:Stack (together-quickstart-dev):
    error: update failed

Resources:
    2 errored
"""


def test_the_cause_alone_is_kept():
    assert failure_summary(REFRESH_API_DOWN, "") == (
        "  provider.errors.TransportError: GET http://127.0.0.1:1/v1/compute/clusters/c-1 failed: "
        "[Errno 111] Connection refused"
    )


def test_engine_error_lines_when_no_exception():
    assert (
        failure_summary("", "error: no stack named 'nope' found\n") == "  error: no stack named 'nope' found"
    )


def test_tail_of_output_when_nothing_says_error():
    assert failure_summary("one\ntwo\nthree\n", "", limit=2) == "  two\n  three"
    assert failure_summary("", "") == "  (no output)"
