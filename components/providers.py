"""The Kubernetes provider of a cluster, with the controllers the components need (:func:`provider_for`).

Above both the installer (:mod:`.cluster_controllers`) and the providers' registry (:mod:`.kube`) it ties
together: the provider is recorded there with its cluster, and the ClusterControllers it declares registers
itself on it.
"""

from __future__ import annotations

import inspect
from typing import cast

import pulumi
import pulumi_kubernetes as k8s

from . import kube
from .cluster_controllers import ClusterControllers, ClusterControllersArgs


def provider_for(
    cluster_or_kubeconfig: kube.HasKubeConfig | pulumi.Input[str],
    render_dir: str | None = None,
    name: str = "k8s",
    opts: pulumi.ResourceOptions | None = None,
    controllers: bool | ClusterControllersArgs = True,
) -> k8s.Provider:
    """The Kubernetes provider for a cluster, with the controllers the components need.

    ``controllers``: by default the provider comes with a
    :class:`~together_clusters.components.ClusterControllers` named ``<name>-controllers`` that installs
    JobSet from its official chart (unless the cluster already has one: then it is used and left alone),
    and every component on this provider whose objects need it waits for it, so a stack on a bare cluster
    needs no line of its own. Pass ``ClusterControllersArgs(...)`` to choose the controllers or the chart
    source (a mirror, a local folder), or ``False`` to install nothing (the cluster has them, or the stack
    declares its own ``ClusterControllers``).

    With ``render_dir`` the provider writes manifests there instead of talking to a cluster (used
    against the emulator, whose kubeconfig points at no real API server); no controllers are declared then
    (a chart would be fetched only to be written out, and there is no cluster to ask what it has).
    """
    if render_dir:
        return k8s.Provider(name, render_yaml_to_directory=render_dir, opts=opts)
    # Not isinstance(HasKubeConfig): an Output answers every attribute, kube_config included.
    kubeconfig: pulumi.Input[str]
    if isinstance(cluster_or_kubeconfig, str | pulumi.Output) or inspect.isawaitable(cluster_or_kubeconfig):
        kubeconfig = cast(pulumi.Input[str], cluster_or_kubeconfig)
        cluster = None
    else:
        kubeconfig = cast(kube.HasKubeConfig, cluster_or_kubeconfig).kube_config
        cluster = cluster_or_kubeconfig
    provider = k8s.Provider(
        name, kubeconfig=pulumi.Output.from_input(kubeconfig).apply(kube.reachable), opts=opts
    )
    if isinstance(cluster, pulumi.Resource):
        kube.register_cluster(provider, cluster)
    if controllers is not False:
        wanted = controllers if isinstance(controllers, ClusterControllersArgs) else ClusterControllersArgs()
        parent = opts.parent if opts is not None else None
        ClusterControllers(
            f"{name}-controllers",
            wanted,
            pulumi.ResourceOptions(provider=provider, parent=parent),
            kubeconfig=pulumi.Output.from_input(kubeconfig),
        )
    return provider


def provider_from_stack_config(cluster: kube.HasKubeConfig, name: str = "k8s") -> k8s.Provider:
    """:func:`provider_for` with the render directory taken from stack config ``renderYamlTo``."""
    return provider_for(cluster, pulumi.Config().get("renderYamlTo"), name)
