"""drift.failure.cause_line on real engine output: the cause alone, on one line."""

from __future__ import annotations

from together_clusters.cli.failure import cause_line

REFRESH_API_DOWN = """\
Previewing update (dev):
~  pulumi-python:dynamic/together_clusters:Cluster quickstart refreshing (11s) error: Traceback (most recent call last):
    pulumi:pulumi:Stack together-quickstart-dev running error: preview failed
Diagnostics:
  pulumi-python:dynamic/together_clusters:Cluster (quickstart):
    error: Traceback (most recent call last):
      File "/work/main/provider/client.py", line 255, in _send_once
        raise errors.TransportError(f"{method} {self.base_url}{path} failed: {exc}") from None
    together_clusters.provider.errors.TransportError: GET http://127.0.0.1:1/v1/compute/clusters/c-1 failed: [Errno 111] Connection refused

  pulumi:pulumi:Stack (together-quickstart-dev):
    error: preview failed
"""


def test_the_exception_a_provider_raised_is_the_cause():
    assert cause_line(REFRESH_API_DOWN) == (
        "together_clusters.provider.errors.TransportError: GET http://127.0.0.1:1/v1/compute/clusters/c-1 "
        "failed: [Errno 111] Connection refused"
    )


def test_the_one_line_a_provider_reports_an_expected_error_in_is_the_cause():
    """The provider reports a TogetherError as one line, which the engine prefixes with the operation."""
    diagnostic = (
        "Preview failed: ServerError: Together API error 503 GET http://h/v1/compute/clusters/c-1: down\n"
    )
    assert cause_line(diagnostic, "code: 255\n stderr:") == (
        "ServerError: Together API error 503 GET http://h/v1/compute/clusters/c-1: down"
    )


def test_else_the_engines_own_error_line():
    stderr = "\n code: 255\n stdout: \n stderr: error: no stack named 'nope' found\n"
    assert cause_line(stderr) == "no stack named 'nope' found"
    wrong = 'error: error: constructing secrets manager of type "passphrase": incorrect passphrase'
    assert cause_line("Previewing update (dev):\n", wrong) == (
        'constructing secrets manager of type "passphrase": incorrect passphrase'
    )


def test_else_the_last_line():
    assert cause_line("one\ntwo\n", "") == "two"
    assert cause_line("", "") == "no output from the engine"


# What the engine reported for `drift` of a template's stack deployed with renderYamlTo (the objects are on
# no cluster, so their refresh fails): the diagnostics' messages as the events carry them (no "error:"
# prefix), then the CommandError, whose stderr was empty. The cause was "stderr:".
RENDERED_UNREACHABLE = (
    "Preview failed: failed to read resource state due to unreachable cluster. If the cluster was deleted, "
    "you can remove this resource from Pulumi state by rerunning the operation with the "
    'PULUMI_K8S_DELETE_UNREACHABLE environment variable set to "true"',
    "preview failed",
)
COMMAND_ERROR = "\n code: 255\n stdout: \n stderr: \n"


def test_an_error_diagnostic_is_the_cause_with_its_noise_prefix_dropped():
    from pulumi import automation as auto

    from together_clusters.cli.workspace import engine_call
    from together_clusters.errors import EngineError

    def fail() -> None:
        raise auto.CommandError(auto.CommandResult(stdout="", stderr="", code=255))

    try:
        engine_call("`pulumi preview --refresh` of stack dev", fail, RENDERED_UNREACHABLE)
    except EngineError as exc:
        message = str(exc)
    assert message.startswith(
        "`pulumi preview --refresh` of stack dev failed: failed to read resource state due to unreachable cluster."
    ), message
