// One multi-call binary for the Kubernetes control plane behind the emulator's twin: kube-apiserver,
// kube-controller-manager, kube-scheduler, etcd and kubectl share almost all of their dependencies, so one
// link is far cheaper (time, RAM, disk) than five. The component is the program name (a symlink named
// kube-apiserver, kubectl, ...) or the first argument (`kubernetes kube-apiserver --flags...`).
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
	_ "time/tzdata" // CronJob time zones

	"go.etcd.io/etcd/server/v3/etcdmain"
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/pkg/controller/job"
)

// jobBackoffEnv shortens the Job controller's delay before it replaces a failed pod (upstream: 10 s,
// doubling). Opt-in, for the emulator's sped-up clock; unset keeps upstream behaviour.
const jobBackoffEnv = "TWIN_JOB_POD_FAILURE_BACKOFF"

func main() {
	component := filepath.Base(os.Args[0])
	args := os.Args
	if component != "kube-apiserver" && component != "kube-controller-manager" &&
		component != "kube-scheduler" && component != "etcd" && component != "kubectl" {
		if len(os.Args) < 2 {
			fmt.Fprintln(os.Stderr, "usage: kubernetes kube-apiserver|kube-controller-manager|kube-scheduler|etcd|kubectl [flags]")
			os.Exit(2)
		}
		component = os.Args[1]
		args = os.Args[1:]
	}
	os.Args = args
	switch component {
	case "kube-apiserver":
		os.Exit(cli.Run(apiserver.NewAPIServerCommand()))
	case "kube-controller-manager":
		if value := os.Getenv(jobBackoffEnv); value != "" {
			backoff, err := time.ParseDuration(value)
			if err != nil || backoff <= 0 {
				fmt.Fprintf(os.Stderr, "%s=%q: want a positive Go duration such as 500ms\n", jobBackoffEnv, value)
				os.Exit(2)
			}
			job.DefaultJobPodFailureBackOff = backoff
		}
		os.Exit(cli.Run(controllermanager.NewControllerManagerCommand()))
	case "kube-scheduler":
		os.Exit(cli.Run(scheduler.NewSchedulerCommand()))
	case "etcd":
		etcdmain.Main(args)
	case "kubectl":
		logs.GlogSetter(cmd.GetLogVerbosity(args)) // nolint:errcheck
		if err := cli.RunNoErrOutput(cmd.NewDefaultKubectlCommand()); err != nil {
			util.CheckErr(err)
		}
	default:
		fmt.Fprintf(os.Stderr, "kubernetes: unknown component %q\n", component)
		os.Exit(2)
	}
}
