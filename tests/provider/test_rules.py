"""The Cluster resource's preview-time rules, through the provider's own check and diff."""

from __future__ import annotations

import pytest
from pulumi.runtime.rpc import UNKNOWN

from together_clusters.provider.resource import ClusterProvider
from together_clusters.provider.rules import plan_change, validate


@pytest.fixture(autouse=True)
def no_api(monkeypatch):
    """These rules need no API: without a key, check skips the region catalog."""
    monkeypatch.delenv("TOGETHER_API_KEY", raising=False)


BASE = {
    "cluster_name": "demo",
    "region": "us-central-8",
    "gpu_type": "H100_SXM",
    "num_gpus": 8,
    "num_preemptible_gpus": 8,
    "nvidia_version_id": "nv-570-cu128-ubuntu2204",
}


def check(news: dict, olds: dict | None = None) -> dict[str, str]:
    result = ClusterProvider().check(olds or {}, news)
    return {f.property: f.reason for f in result.failures}


def diff(olds: dict, news: dict):
    return ClusterProvider().diff("c-1", olds, news)


def test_valid_inputs_pass_and_get_defaults():
    result = ClusterProvider().check({}, dict(BASE))
    assert result.failures == []
    assert result.inputs["billing_type"] == "ON_DEMAND"
    assert result.inputs["cluster_type"] == "KUBERNETES"
    assert result.inputs["ready_timeout_minutes"] == 60


@pytest.mark.parametrize("preemptible", [0, 16, 64])
def test_zero_standard_gpus_is_refused_however_many_preemptible(preemptible):
    failures = check(BASE | {"num_gpus": 0, "num_preemptible_gpus": preemptible})
    message = failures["num_gpus"]
    assert "num_gpus is 0" in message
    assert "at least one standard node" in message
    assert "Set num_gpus to 8 or more" in message


def test_zero_standard_gpus_refused_on_update_too():
    failures = check(BASE | {"num_gpus": 0, "num_preemptible_gpus": 16}, olds=BASE)
    assert "at least one standard node" in failures["num_gpus"]


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        (
            "num_gpus",
            12,
            "num_gpus is 12: GPUs come in whole nodes of 8, so it must be a multiple of 8 (use 8 or 16).",
        ),
        (
            "num_preemptible_gpus",
            4,
            "num_preemptible_gpus is 4: GPUs come in whole nodes of 8, so it must be a multiple of 8 (use 8).",
        ),
        ("num_preemptible_gpus", -8, "num_preemptible_gpus must be a whole number, 0 or more; got -8."),
        ("num_gpus", "8", "num_gpus must be a whole number; got '8'."),
    ],
)
def test_gpu_counts(field, value, expected):
    assert check(BASE | {field: value})[field] == expected


def test_enums_name_the_allowed_values():
    failures = check(BASE | {"gpu_type": "H100", "billing_type": "SPOT"})
    assert failures["gpu_type"].startswith(
        "gpu_type 'H100' is not one the API accepts; use one of H100_SXM, H200_SXM"
    )
    assert "use one of RESERVED, ON_DEMAND, SCHEDULED_CAPACITY" in failures["billing_type"]


def test_scheduled_capacity_needs_both_times():
    failures = check(
        BASE | {"billing_type": "SCHEDULED_CAPACITY", "reservation_start_time": "2027-01-01T00:00:00Z"}
    )
    assert failures == {
        "reservation_end_time": "billing_type SCHEDULED_CAPACITY needs reservation_end_time: set both reservation times."
    }


def test_reservation_end_must_follow_start():
    failures = check(
        BASE
        | {
            "billing_type": "SCHEDULED_CAPACITY",
            "reservation_start_time": "2027-01-02T00:00:00Z",
            "reservation_end_time": "2027-01-01T00:00:00Z",
        }
    )
    assert "must be after reservation_start_time" in failures["reservation_end_time"]


def test_slurm_needs_shared_memory_size():
    failures = check(BASE | {"cluster_type": "SLURM"})
    assert failures["slurm_shm_size_gib"] == (
        "cluster_type SLURM needs slurm_shm_size_gib (shared memory in GiB); set it."
    )
    assert check(BASE | {"cluster_type": "SLURM", "slurm_shm_size_gib": 64, "num_preemptible_gpus": 0}) == {}


def test_preemptible_gpus_on_a_slurm_cluster_are_refused_naming_the_fix():
    """Slurm clusters do not support preemptible nodes yet (the platform's preemptible-compute docs)."""
    slurm = BASE | {"cluster_type": "SLURM", "slurm_shm_size_gib": 64}
    failures = check(slurm | {"num_preemptible_gpus": 8})
    assert failures == {
        "num_preemptible_gpus": "num_preemptible_gpus is 8 but cluster_type is SLURM: Slurm clusters do not "
        "support preemptible nodes. Set num_preemptible_gpus to 0 (or remove it), or use "
        "cluster_type='KUBERNETES'."
    }
    assert "\n" not in failures["num_preemptible_gpus"]
    assert check(slurm | {"num_preemptible_gpus": 0}) == {}
    assert check(BASE | {"num_preemptible_gpus": 8}) == {}


def test_driver_pair_and_volume_choice():
    failures = check(
        BASE
        | {
            "cuda_version": "12.4",
            "shared_volume": {"region": "r", "size_tib": 1, "volume_name": "v"},
            "volume_id": "vol-1",
        }
    )
    assert "cuda_version is set without nvidia_driver_version" in failures["nvidia_driver_version"]
    assert "not both" in failures["volume_id"]


def test_nested_shapes_are_checked_with_paths():
    failures = check(BASE | {"cluster_config": {"load_balancer": "HAPROXY"}})
    assert failures["cluster_config"].startswith(
        "cluster_config.load_balancer: Input should be 'NONE', 'TRAEFIK'"
    )
    failures = check(BASE | {"shared_volume": {"region": "us-central-8"}})
    assert "shared_volume.size_tib: Field required" in failures["shared_volume"]


def test_missing_required_fields():
    failures = check({"cluster_name": "x"})
    assert set(failures) == {"region", "gpu_type", "num_gpus"}


def test_unknown_values_are_accepted_at_preview():
    assert check(BASE | {"num_gpus": UNKNOWN, "region": UNKNOWN}) == {}
    assert validate(BASE | {"cluster_config": {"load_balancer": UNKNOWN}}) == []


# --- diff ------------------------------------------------------------------------------------


def test_no_change_no_diff_and_outputs_never_diff():
    olds = BASE | {
        "billing_type": "ON_DEMAND",
        "allocated_preemptible_gpus": 0,
        "status": "Ready",
        "preemptible_shortfall_gpus": 8,
        "project_id": "proj-1",
        "cuda_version": "12.4",
    }
    result = diff(olds, dict(BASE))
    assert result.changes is False
    assert result.replaces == []


def test_preemptible_change_updates_in_place():
    result = diff(BASE, BASE | {"num_preemptible_gpus": 16})
    assert result.changes is True
    assert result.replaces == []


@pytest.mark.parametrize(
    "field,value",
    [
        ("region", "us-east-2"),
        ("gpu_type", "H200_SXM"),
        ("billing_type", "RESERVED"),
        ("nvidia_version_id", "nv-other-driver"),
        ("volume_id", "vol-2"),
        ("reservation_start_time", "2027-01-01T00:00:00Z"),
    ],
)
def test_fields_the_api_cannot_change_replace_and_are_named(field, value):
    result = diff(BASE, BASE | {field: value})
    assert result.replaces == [field]
    # Same name: the new cluster would collide, so the old one goes first.
    assert result.delete_before_replace is True


def test_renaming_replaces_create_before_delete():
    result = diff(BASE, BASE | {"cluster_name": "demo-2"})
    assert result.replaces == ["cluster_name"]
    assert result.delete_before_replace is False


def test_renaming_a_cluster_with_a_volume_deletes_before_it_replaces():
    """The volume is attached to one live cluster at a time: the old one must go first."""
    result = diff(BASE | {"volume_id": "vol-1"}, BASE | {"volume_id": "vol-1", "cluster_name": "demo-2"})
    assert result.replaces == ["cluster_name"]
    assert result.delete_before_replace is True


def test_unknown_replace_field_counts_as_replace():
    assert diff(BASE, BASE | {"region": UNKNOWN}).replaces == ["region"]


def test_timestamps_compare_as_instants():
    olds = BASE | {"reservation_end_time": "2027-01-01T00:00:00Z"}
    assert diff(olds, BASE | {"reservation_end_time": "2027-01-01T00:00:00+00:00"}).changes is False


def test_ready_timeout_is_local_only():
    plan = plan_change(BASE, BASE | {"ready_timeout_minutes": 5})
    assert plan.local == ["ready_timeout_minutes"] and plan.update == [] and plan.replace == []


# --- conversion -------------------------------------------------------------------------------


def test_conversion_standard_to_preemptible_is_refused_with_the_way_there():
    olds = BASE | {"num_gpus": 16, "num_preemptible_gpus": 8}
    failures = check(BASE | {"num_gpus": 8, "num_preemptible_gpus": 16}, olds=olds)
    assert failures["num_gpus"] == (
        "num_gpus 16 -> 8 together with num_preemptible_gpus 8 -> 16 would convert standard nodes into "
        "preemptible ones in place, which the platform cannot do. Change one class per update: raise "
        "num_preemptible_gpus to 16 with num_gpus kept at 16, deploy, then lower num_gpus to 8. "
        "Or replace the cluster (`pulumi up --replace <urn>`)."
    )


def test_conversion_preemptible_to_standard_is_refused():
    failures = check(BASE | {"num_gpus": 16, "num_preemptible_gpus": 0}, olds=BASE)
    assert "convert preemptible nodes into standard ones" in failures["num_gpus"]
    assert "raise num_gpus to 16 with num_preemptible_gpus kept at 8" in failures["num_gpus"]


def test_one_class_at_a_time_is_fine():
    olds = BASE | {"num_gpus": 16}
    assert check(BASE | {"num_gpus": 16, "num_preemptible_gpus": 16}, olds=olds) == {}
    assert (
        check(
            BASE | {"num_gpus": 8, "num_preemptible_gpus": 16},
            olds=BASE | {"num_gpus": 16, "num_preemptible_gpus": 16},
        )
        == {}
    )
    # Growing both classes at once is no conversion either.
    assert check(BASE | {"num_gpus": 16, "num_preemptible_gpus": 16}, olds=BASE) == {}


def test_conversion_inside_a_replacement_is_allowed():
    olds = BASE | {"num_gpus": 16, "num_preemptible_gpus": 8}
    assert check(BASE | {"region": "us-east-2", "num_gpus": 8, "num_preemptible_gpus": 16}, olds=olds) == {}


def test_adoption_is_one_off():
    olds = BASE | {"cluster_id": "c-1", "adopt_cluster_id": "c-1"}
    assert diff(olds, BASE | {"adopt_cluster_id": "c-1"}).changes is False
    assert diff(olds, dict(BASE)).changes is False
    assert diff(olds, BASE | {"adopt_cluster_id": "c-2"}).replaces == ["adopt_cluster_id"]


def test_whole_numbers_from_the_engine_wire_are_integers():
    """The engine sends every number as a float: 8 arrives as 8.0 and must pass as 8."""
    result = ClusterProvider().check({}, BASE | {"num_gpus": 8.0, "num_preemptible_gpus": 16.0})
    assert result.failures == []
    assert result.inputs["num_gpus"] == 8 and isinstance(result.inputs["num_gpus"], int)
    assert check(BASE | {"num_gpus": 8.5})["num_gpus"] == "num_gpus must be a whole number; got 8.5."


# --- issue 9: preview-time errors that name the field, the value and the fix ----------------------


def test_reserved_gpus_on_an_on_demand_cluster_are_refused_at_preview():
    message = check(BASE | {"num_reserved_gpus": 8})["num_reserved_gpus"]
    assert "ON_DEMAND" in message and "8" in message and "billing_type='RESERVED'" in message


def test_reserved_gpus_above_num_gpus_are_refused_at_preview():
    message = check(BASE | {"billing_type": "RESERVED", "num_reserved_gpus": 16})["num_reserved_gpus"]
    assert "16" in message and "num_gpus is 8" in message and "8 or less" in message


def test_zero_duration_days_is_refused_at_preview():
    message = check(BASE | {"duration_days": 0})["duration_days"]
    assert "got 0" in message and "1 or more" in message


def test_a_shared_volume_in_another_region_is_refused_at_preview():
    volume = {"region": "us-east-2", "size_tib": 1, "volume_name": "data"}
    message = check(BASE | {"shared_volume": volume})["shared_volume"]
    assert "'us-east-2'" in message and "'us-central-8'" in message


def test_no_driver_and_no_catalog_is_refused_with_the_fix():
    news = {k: v for k, v in BASE.items() if k != "nvidia_version_id"}
    message = check(news)["nvidia_version_id"]
    assert "set nvidia_version_id" in message and "cuda_version with nvidia_driver_version" in message
    # Both halves of the legacy selector are a choice too.
    assert check(news | {"cuda_version": "12.8", "nvidia_driver_version": "570"}) == {}


def test_a_field_missing_from_state_or_left_to_the_server_is_no_change():
    """Absent in a reply (so absent in state) or normalised by the server: no delete-before-replace."""
    from together_clusters.provider.mapping import read_inputs
    from together_clusters.provider.models import Cluster

    code = BASE | {
        "cluster_type": "SLURM",
        "slurm_shm_size_gib": 64,
        "cuda_version": "12.8",
        "nvidia_driver_version": "570",
    }
    live = Cluster.model_validate(
        {
            "cluster_id": "c-1",
            "cluster_name": "demo",
            "region": "us-central-8",
            "gpu_type": "H100_SXM",
            "num_gpus": 8,
            "desired_preemptible_gpus": 8,
            "cluster_type": "SLURM",
            "cuda_version": "12.8.1",  # the server's spelling of the code's 12.8
            "nvidia_driver_version": "570.124.06",
        }
    )
    refreshed = read_inputs(live, code)
    plan = plan_change(refreshed, code)
    assert plan.replace == [] and not plan.delete_before_replace


def test_adding_an_add_on_is_a_replacement_at_preview_and_a_config_change_is_an_update():
    dash = {"name": "dash", "add_on_type": "dashboard", "config": {"dashboard": {"enabled": True}}}
    olds = BASE | {"add_ons": [dash]}
    grown = BASE | {"add_ons": [dash, {"name": "lb", "add_on_type": "ingress"}]}
    assert plan_change(olds, grown).replace == ["add_ons"]
    off = dict(dash, config={"dashboard": {"enabled": False}})
    assert plan_change(olds, BASE | {"add_ons": [off]}).update == ["add_ons"]


def test_conversion_is_refused_with_old_inputs_as_the_engine_sends_them():
    """The engine's wire has one number type: old inputs arrive as 16.0, and must still be compared."""
    olds = BASE | {"num_gpus": 16.0, "num_preemptible_gpus": 8.0}
    failures = check(BASE | {"num_gpus": 8, "num_preemptible_gpus": 16}, olds=olds)
    assert "convert standard nodes into preemptible ones" in failures["num_gpus"]


INLINE = {"region": "us-central-8", "size_tib": 1, "volume_name": "ckpt"}


def test_replacing_a_cluster_with_an_inline_dependent_volume_is_refused_naming_the_volume_and_ways_out():
    olds = BASE | {"shared_volume": INLINE, "cluster_id": "c-1"}
    failures = check(BASE | {"shared_volume": INLINE, "gpu_type": "H200_SXM"}, olds)
    message = failures["gpu_type"]
    assert "'ckpt'" in message and "cluster 'demo'" in message
    assert "Volume" in message and "is_lifecycle_independent" in message and "allow_data_loss=True" in message


def test_an_inline_volume_may_go_with_the_cluster_when_opted_in_or_independent():
    olds = BASE | {"shared_volume": INLINE}
    news = BASE | {"shared_volume": INLINE, "gpu_type": "H200_SXM"}
    assert check(news | {"allow_data_loss": True}, olds) == {}
    independent = INLINE | {"is_lifecycle_independent": True}
    assert (
        check(
            BASE | {"shared_volume": independent, "gpu_type": "H200_SXM"},
            BASE | {"shared_volume": independent},
        )
        == {}
    )
    # allow_data_loss is ours alone: changing it is no change to the cluster.
    assert not diff(olds, olds | {"allow_data_loss": True}).replaces


# --- the whole API: autoscaling, capacity pools, OIDC, acceptance tests, per-type fields --------------


def test_autoscaling_needs_its_ceiling_whole_nodes_and_at_least_the_floor():
    assert check(BASE | {"auto_scale": True, "auto_scale_max_gpus": 32}) == {}
    no_ceiling = check(BASE | {"auto_scale": True})["auto_scale_max_gpus"]
    assert (
        "auto_scale_max_gpus is not set" in no_ceiling
        and "Set auto_scale_max_gpus to 16 or more" in no_ceiling
    )
    assert (
        "multiple of 8 (use 16 or 24)"
        in check(BASE | {"auto_scale": True, "auto_scale_max_gpus": 20})["auto_scale_max_gpus"]
    )
    below = check(BASE | {"num_gpus": 16, "auto_scale": True, "auto_scale_max_gpus": 8})[
        "auto_scale_max_gpus"
    ]
    assert "auto_scale_max_gpus is 8 but num_gpus is 16" in below
    alone = check(BASE | {"auto_scale_max_gpus": 32})["auto_scale_max_gpus"]
    assert "auto_scale is not True" in alone and "Set auto_scale=True" in alone


def test_a_ceiling_not_yet_known_at_preview_is_not_refused():
    assert check(BASE | {"auto_scale": True, "auto_scale_max_gpus": UNKNOWN}) == {}


def test_a_capacity_pool_draw_is_whole_nodes_a_share_of_num_gpus_and_needs_the_pool():
    assert check(BASE | {"capacity_pool_id": "cp-1", "num_capacity_pool_gpus": 8}) == {}
    assert (
        "capacity_pool_id is not set" in check(BASE | {"num_capacity_pool_gpus": 8})["num_capacity_pool_gpus"]
    )
    over = check(BASE | {"capacity_pool_id": "cp-1", "num_capacity_pool_gpus": 16})["num_capacity_pool_gpus"]
    assert "num_capacity_pool_gpus is 16 but num_gpus is 8" in over
    assert (
        "multiple of 8"
        in check(BASE | {"capacity_pool_id": "cp-1", "num_capacity_pool_gpus": 4})["num_capacity_pool_gpus"]
    )


def test_fields_of_one_cluster_type_are_refused_on_the_other():
    traefik = check(
        BASE
        | {
            "cluster_type": "SLURM",
            "slurm_shm_size_gib": 64,
            "num_preemptible_gpus": 0,
            "install_traefik": True,
        }
    )
    assert traefik == {
        "install_traefik": "install_traefik is True but cluster_type is SLURM: it applies to KUBERNETES clusters "
        "only. Remove install_traefik, or set cluster_type='KUBERNETES'."
    }
    assert (
        "applies to SLURM clusters only" in check(BASE | {"slurm_image": "ghcr.io/me/slurm:1"})["slurm_image"]
    )
    assert check(BASE | {"install_traefik": True}) == {}


def test_oidc_and_acceptance_tests_are_checked_key_by_key_at_preview():
    oidc = {
        "issuer_url": "https://issuer.example",
        "client_id": "k8s",
        "username_claim": "email",
        "username_prefix": "oidc:",
        "group_claim": "groups",
        "group_prefix": "oidc:",
    }
    assert check(BASE | {"oidc_config": oidc, "acceptance_tests_params": {"enabled": True}}) == {}
    missing = check(BASE | {"oidc_config": {k: v for k, v in oidc.items() if k != "client_id"}})[
        "oidc_config"
    ]
    assert "oidc_config.client_id: Field required" in missing
    level = check(BASE | {"acceptance_tests_params": {"dcgm_diag_level": "DEEP"}})["acceptance_tests_params"]
    assert "acceptance_tests_params.dcgm_diag_level" in level and "'DEEP'" in level


def test_each_new_field_changes_as_the_api_allows():
    pooled = BASE | {"capacity_pool_id": "cp-1", "num_capacity_pool_gpus": 0}
    assert plan_change(pooled, pooled | {"num_capacity_pool_gpus": 8}).update == ["num_capacity_pool_gpus"]
    scaling = BASE | {"auto_scale": True, "auto_scale_max_gpus": 32}
    assert plan_change(scaling, scaling | {"auto_scale_max_gpus": 64}).replace == ["auto_scale_max_gpus"]
    assert plan_change(BASE, scaling).replace == ["auto_scale", "auto_scale_max_gpus"]
    assert plan_change(BASE, BASE | {"install_traefik": True}).replace == ["install_traefik"]


def test_an_acceptance_test_change_after_bring_up_is_recorded_and_replaces_nothing():
    tested = BASE | {"acceptance_tests_params": {"enabled": True}}
    plan = plan_change(tested, tested | {"acceptance_tests_params": {"enabled": False}})
    assert (plan.replace, plan.update, plan.local) == ([], [], ["acceptance_tests_params"])
