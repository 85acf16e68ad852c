"""What the engine stores about the Cluster resource must stay readable by later releases, and must
hold no secret."""

from __future__ import annotations

import base64

import dill
from pulumi.dynamic.dynamic import serialize_provider

from provider import Cluster, settings
from provider.resource import ClusterProvider


class _StackConfig(dict):
    def get(self, key, default=None):  # the shape of pulumi.dynamic.Config
        return super().get(key, default)


def test_type_token_is_stable():
    assert Cluster._resource_type_name == "dynamic/together:Cluster"


def test_provider_is_pickled_by_reference_and_carries_no_key(monkeypatch):
    secret = "tgp_v1_pickle-test-secret-key"
    monkeypatch.setenv("TOGETHER_API_KEY", secret)
    provider = ClusterProvider()
    provider.configure(type("Req", (), {"config": _StackConfig({"together:apiKey": secret})})())
    try:
        raw = base64.b64decode(serialize_provider(provider))
    finally:
        settings.take_stack_config(_StackConfig())
    assert b"provider.resource" in raw and b"ClusterProvider" in raw
    assert secret.encode() not in raw
    # By reference: a small pickle that names the class, with no bytecode of ours inside.
    assert len(raw) < 200
    assert type(dill.loads(raw)) is ClusterProvider
    assert vars(provider) == {}
