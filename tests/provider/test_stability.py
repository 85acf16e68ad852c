"""What the engine stores about the Cluster resource must stay readable by later releases, and must
hold no secret."""

from __future__ import annotations

import base64
import os
import subprocess
import sys

import dill
from pulumi.dynamic.dynamic import serialize_provider

from together_clusters.provider import Cluster, settings
from together_clusters.provider.resource import ClusterProvider


class _StackConfig(dict):
    def get(self, key, default=None):  # the shape of pulumi.dynamic.Config
        return super().get(key, default)


def test_type_token_is_stable():
    assert Cluster._resource_type_name == "dynamic/together_clusters:Cluster"


def test_provider_is_pickled_by_reference_and_carries_no_key(monkeypatch):
    secret = "tgp_v1_pickle-test-secret-key"
    monkeypatch.setenv("TOGETHER_API_KEY", secret)
    provider = ClusterProvider()
    provider.configure(type("Req", (), {"config": _StackConfig({"together:apiKey": secret})})())
    try:
        raw = base64.b64decode(serialize_provider(provider))
    finally:
        settings.take_stack_config(_StackConfig())
    assert b"together_clusters.provider.resource" in raw and b"ClusterProvider" in raw
    assert secret.encode() not in raw
    # By reference: a small pickle that names the class, with no bytecode of ours inside.
    assert len(raw) < 200
    assert type(dill.loads(raw)) is ClusterProvider
    assert vars(provider) == {}


def test_a_users_own_provider_and_components_do_not_shadow_ours(tmp_path):
    """A Pulumi project with its own ``provider.py`` and ``components/`` beside ``__main__.py``: the
    provider host (started in the project directory) still unpickles our provider from the state."""
    (tmp_path / "provider.py").write_text("raise ImportError('the user provider.py was imported')\n")
    (tmp_path / "components").mkdir()
    (tmp_path / "components" / "__init__.py").write_text("raise ImportError('the user components/')\n")
    (tmp_path / "drift.py").write_text("raise ImportError('the user drift.py')\n")
    pickled = serialize_provider(ClusterProvider())
    program = (
        "import base64, sys, dill\n"
        "provider = dill.loads(base64.b64decode(sys.argv[1]))\n"
        "import together_clusters.components, together_clusters.cli.main\n"
        "print(type(provider).__module__, type(provider).__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program, pickled],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["together_clusters.provider.resource", "ClusterProvider"]


def test_ready_is_seen_at_most_max_2s_or_a_tenth_of_the_wait_late():
    """The poll schedule: a state reached after t seconds of waiting is seen by t + max(2, t/10)."""
    from together_clusters.provider.waiting import PollSchedule

    schedule = PollSchedule()
    for elapsed in [0, 1, 5, 20, 60, 120, 300, 600, 1800]:
        assert schedule.delay(elapsed) <= max(2.0, elapsed / 10)


def test_a_state_reached_early_in_a_wait_is_seen_before_a_whole_second():
    """A cluster Ready (or gone) 0.2 s into the wait is seen by 0.4 s, not held to the 1 s floor (which
    made 20 quick creates or deletes each take a second more than the API did)."""
    from together_clusters.provider.waiting import wait_until

    now = [0.0]
    polls: list[float] = []

    def fetch() -> bool:
        polls.append(now[0])
        return now[0] >= 0.2

    def sleep(seconds: float) -> None:
        now[0] += seconds

    wait_until(
        fetch, bool, timeout_s=60, what="w", progress=lambda _: None, clock=lambda: now[0], sleep=sleep
    )
    assert polls[-1] <= 0.4 + 1e-9, polls
    assert len(polls) <= 4, polls
