"""The emulator's Kubernetes twin: a real control plane behind each emulated cluster, with kwok-simulated nodes.

Each emulated cluster gets its own kube-apiserver, kube-controller-manager, kube-scheduler and etcd, plus a
kwok controller that plays the kubelet of every node (no containers run), except for pods that opt in to run
as real local processes. The emulator's node set is mirrored
as Nodes, and preemption is played on them as the platform announces it.

Modules: ``binaries`` (the built programs), ``pki`` (credentials), ``kubeconfig`` (the cluster's API
endpoint), ``kwok_config`` (the simulated kubelet's stages), ``controlplane`` (processes), ``nodes`` (Node
objects from node records, pure), ``preemption`` (termination modes and the drill), ``local_pods`` (what a
kubelet would run for an opted-in pod, pure), ``demand`` (what an autoscaling cluster's pods ask of the
platform, pure), ``local_runtime`` (runs them as processes), ``reaper`` (kills
what is left when the emulator dies), ``twin`` (keeps every cluster's control plane in step with the
platform), ``platform`` (the platform with a twin).

This package's ``__init__`` imports nothing, so the lightweight emulator never loads the Kubernetes client.
"""
