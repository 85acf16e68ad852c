// A GPU cluster with a shared volume, in Go, on the generated SDK (sdk/go) and the together plugin.
// tests/sdk/test_sdks.py builds it with `go build` (Go programs cannot run on our machines: the Go language
// host is not to be had here).
package main

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/config"

	"github.com/together-gpu-clusters/sdk/go/together"
)

func main() {
	pulumi.Run(func(ctx *pulumi.Context) error {
		cfg := config.New(ctx, "")
		region := cfg.Get("region")
		if region == "" {
			region = "us-central-8"
		}

		volume, err := together.NewVolume(ctx, "data", &together.VolumeArgs{
			VolumeName: pulumi.String("training-data"),
			Region:     pulumi.String(region),
			SizeTib:    pulumi.Int(2),
		})
		if err != nil {
			return err
		}

		cluster, err := together.NewCluster(ctx, "gpus", &together.ClusterArgs{
			ClusterName:        pulumi.String("research"),
			Region:             pulumi.String(region),
			GpuType:            together.GpuType_H100_SXM,
			NumGpus:            pulumi.Int(8),
			NumPreemptibleGpus: pulumi.Int(16),
			BillingType:        together.BillingType_ON_DEMAND,
			VolumeId:           volume.VolumeId,
			ClusterConfig: &together.ClusterConfigArgs{
				LoadBalancer: together.LoadBalancerNONE,
			},
			AcceptanceTestsParams: &together.AcceptanceTestsArgs{
				Enabled:       pulumi.Bool(true),
				DcgmDiagLevel: together.DcgmDiagLevel_DCGM_DIAG_LEVEL_SHORT,
			},
		})
		if err != nil {
			return err
		}

		// A cluster made elsewhere (the console, `tg`), read by id and not managed.
		if id := cfg.Get("existingClusterId"); id != "" {
			existing, err := together.GetCluster(ctx, "existing", pulumi.ID(id), nil)
			if err != nil {
				return err
			}
			ctx.Export("existingStatus", existing.Status)
		}

		ctx.Export("clusterId", cluster.ClusterId)
		ctx.Export("kubeConfig", cluster.KubeConfig) // a secret
		ctx.Export("volumeId", volume.VolumeId)
		return nil
	})
}
