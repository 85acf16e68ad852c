"""A GPU cluster with a shared volume, in Python, on the generated SDK (sdk/python, ``pulumi_together``).

The native resources of the together plugin, for programs that want them over the dynamic ``together_clusters``
resources (the same behaviour; the plugin's types can be imported and read with ``get``). tests/sdk/test_sdks.py
imports the SDK and type-checks this program with mypy.
"""

import pulumi
import pulumi_together as together

config = pulumi.Config()
region = config.get("region") or "us-central-8"

volume = together.Volume(
    "data",
    volume_name="training-data",
    region=region,
    size_tib=2,
)

cluster = together.Cluster(
    "gpus",
    cluster_name=config.get("clusterName") or "research",
    region=region,
    gpu_type=together.GpuType.H100_SXM,
    num_gpus=8,
    num_preemptible_gpus=config.get_int("numPreemptibleGpus") or 16,
    billing_type=together.BillingType("ON_DEMAND"),
    volume_id=volume.volume_id,
    cluster_config=together.ClusterConfigArgs(load_balancer=together.LoadBalancer.NONE),
    acceptance_tests_params=together.AcceptanceTestsArgs(
        enabled=True, dcgm_diag_level=together.DcgmDiagLevel("DCGM_DIAG_LEVEL_SHORT")
    ),
)

# A cluster made elsewhere (the console, `tg`), read by id and not managed.
existing = config.get("existingClusterId")
if existing:
    pulumi.export("existingStatus", together.Cluster.get("existing", existing).status)

cluster_id: pulumi.Output[str] = cluster.cluster_id
pulumi.export("clusterId", cluster_id)
pulumi.export("kubeConfig", cluster.kube_config)  # a secret
pulumi.export("volumeId", volume.volume_id)
