// A GPU cluster with a shared volume, in TypeScript, on the generated SDK (sdk/nodejs) and the together plugin.
// tests/sdk/test_sdks.py type-checks it with `tsc --noEmit` (TypeScript programs cannot run on our machines:
// the Node.js language host is not to be had here).
import * as pulumi from "@pulumi/pulumi";
import * as together from "@together-gpu-clusters/together";

const config = new pulumi.Config();
const region = config.get("region") ?? "us-central-8";

const volume = new together.Volume("data", {
    volumeName: "training-data",
    region,
    sizeTib: 2,
});

const cluster = new together.Cluster("gpus", {
    clusterName: config.get("clusterName") ?? "research",
    region,
    gpuType: together.types.enums.GpuType.H100_SXM,
    numGpus: 8,
    numPreemptibleGpus: config.getNumber("numPreemptibleGpus") ?? 16,
    billingType: "ON_DEMAND",
    volumeId: volume.volumeId,
    clusterConfig: { loadBalancer: together.types.enums.LoadBalancer.NONE },
    acceptanceTestsParams: { enabled: true, dcgmDiagLevel: "DCGM_DIAG_LEVEL_SHORT" },
});

// A cluster made elsewhere (the console, `tg`), read by id and not managed.
const existing = config.get("existingClusterId");
export const existingStatus = existing ? together.Cluster.get("existing", existing).status : undefined;

export const clusterId: pulumi.Output<string> = cluster.clusterId;
export const kubeConfig: pulumi.Output<string> = cluster.kubeConfig; // a secret
export const volumeId: pulumi.Output<string> = volume.volumeId;
