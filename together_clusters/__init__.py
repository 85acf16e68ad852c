"""Together AI GPU clusters with preemptible capacity, as code.

One import namespace for the whole distribution, so that a user's own ``provider.py`` or ``components/``
beside a Pulumi program never shadows ours. Where each part lives in the repository (pyproject.toml's
``package-dir`` maps the folders; nothing is linked):

- ``together_clusters`` (``together_clusters/``): the platform's facts (``platform``), the error tree
  (``errors``) and the preemption sequence played on Kubernetes (``sequences``).
- ``together_clusters.provider`` (``provider/``): the ``Cluster`` and ``Volume`` resources and the compute API
  client.
- ``together_clusters.components`` (``components/``): preemption-aware workload components.
- ``together_clusters.components.checkpoint`` (``runtime/``): the in-container checkpoint runtime, the
  distribution ``together-gpu-checkpoint``, which training images install alone and this one depends on.
- ``together_clusters.cli`` (``cli/``): the ``together-clusters`` command, one subpackage per command.
- ``together_clusters.emulator`` (``emulator/``): the local emulator of the compute API (the ``emulator``
  and ``twin`` extras).
- ``together_clusters.templates`` (``templates/``): the ``pulumi new`` templates
  (``python -m together_clusters.templates``).
"""

# The checkpoint runtime's files (together_clusters/components/checkpoint/) come from another distribution.
# Installed, both land in one site-packages directory; in a source checkout, or with editable installs, they are
# in separate folders, which extend_path joins (as it would a namespace package's portions).
from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)
