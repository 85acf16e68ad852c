"""The platform's own sequences, played on a cluster's Kubernetes API (the ``kubernetes`` client).

:mod:`~together_clusters.sequences.preemption` is the preemption sequence as Together plays it: the emulator's
Kubernetes twin plays it on its nodes, and ``together-clusters drill`` plays it as a game day on a real cluster,
so both follow one definition. Above :mod:`together_clusters.platform` (facts, standard library only), below
everything else; the emulator may import it.
"""
