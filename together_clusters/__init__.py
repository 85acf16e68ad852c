"""Together AI GPU clusters with preemptible capacity, as code.

One import namespace for the whole distribution, so that a user's own ``provider.py``, ``components/``
or ``drift.py`` beside a Pulumi program never shadows ours:

- ``together_clusters.provider``: the ``Cluster`` resource and the compute API client.
- ``together_clusters.components``: preemption-aware workload components and the checkpoint runtime.
- ``together_clusters.emulator``: the local emulator of the compute API (the ``emulator`` and ``twin``
  extras).
- ``together_clusters.drift``: the ``together-clusters`` command.
- ``together_clusters.templates``: the ``pulumi new`` templates (``python -m together_clusters.templates``).

In the repository each subpackage keeps its top-level folder; this package links to them.

The checkpoint runtime also installs alone, without Pulumi: ``together-gpu-checkpoint`` (``runtime/``).
"""
