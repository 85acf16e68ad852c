"""The fleet's dispatcher: which one worker each workload of a ``FleetQueue`` goes to, half price first and then
in the order of the fleet's workers.

Kueue v0.17.0's MultiKueue copies an admitted workload to every worker and lets the first to admit it run it
(AllAtOnce), or nominates three workers at a time in alphabetical order (Incremental). Neither knows price or
preference. Its third mode, External (any ``multiKueue.dispatcherName`` but those two), leaves the choice to a
controller of one's own: MultiKueue copies a workload only to the workers in its ``status.nominatedClusterNames``
and removes it from the others. This package is that controller, run on the manager by the ``FleetQueue``
(:mod:`together_clusters.components.manifests.fleet_dispatch` lays it out):

- :mod:`.plan` (pure) reads what is free on each worker (GPUs per schedulable node, by class) and decides,
  workload by workload in the order they were submitted;
- :mod:`.kube` is a small client of the Kubernetes API on the standard library;
- ``python -m together_clusters.components.fleet_dispatch`` (:mod:`.__main__`) runs the passes.

It uses only the standard library, :mod:`together_clusters.platform` and the error tree, so its code travels in
a ConfigMap and runs on any Python image: no image of this package is needed on the manager.
"""
