"""The controllers the components' objects need, installed from their official Helm charts (pure modules).

:mod:`together_clusters.platform.charts` holds the pinned facts of each chart (one home, which the
emulator's twin reads too), ``releases`` turns
:class:`~together_clusters.components.controllers.releases.ClusterControllersArgs` into chart references and
values as plain data, ``detection`` asks a cluster what it already serves. The Pulumi shell is
:class:`together_clusters.components.ClusterControllers` (``components/cluster_controllers.py``).
"""
