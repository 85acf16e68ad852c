"""Which key and endpoint `status` reads a cluster with: the provider's order."""

from __future__ import annotations

from pulumi import automation as auto

from together_clusters.cli.api_settings import ApiSettings, for_cluster, from_stack_config
from together_clusters.cli.stack_state import StateResource
from together_clusters.provider.settings import API_KEY_CONFIG, BASE_URL_CONFIG


def test_the_stack_config_gives_key_and_endpoint():
    config = {
        API_KEY_CONFIG: auto.ConfigValue("tk-123", secret=True),
        BASE_URL_CONFIG: auto.ConfigValue("http://127.0.0.1:9/"),
        "proj:other": auto.ConfigValue("x"),
    }
    settings = from_stack_config(config)
    assert settings == ApiSettings("tk-123", "http://127.0.0.1:9/")
    assert "tk-123" not in repr(settings)


def test_without_config_the_environment_decides():
    assert from_stack_config({}) == ApiSettings(None, None)
    assert from_stack_config({API_KEY_CONFIG: auto.ConfigValue("  ")}) == ApiSettings(None, None)


def test_a_cluster_is_read_from_the_endpoint_it_was_created_on():
    stack = ApiSettings("tk", "http://config")
    recorded = StateResource("urn", "t", "c-1", outputs={"api_endpoint": "http://created-here"})
    assert for_cluster(recorded, stack) == ApiSettings("tk", "http://created-here")
    assert for_cluster(StateResource("urn", "t", "c-2"), stack) == stack
