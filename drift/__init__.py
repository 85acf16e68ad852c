"""Drift detection and capacity status for Pulumi stacks of Together GPU clusters.

``together-clusters drift`` refreshes a throwaway copy of a stack's state and sorts every difference into
spec drift (changed outside the code), missing (deleted outside the code) and information that is normal on
preemptible capacity (shortfall, preemption churn). ``together-clusters status`` reports allocation, nodes,
lifecycle events and savings per cluster. The classification (``together_clusters.drift.classify``), the capacity figures
(``together_clusters.drift.capacity``, ``together_clusters.drift.timeline``) and the renderings are pure functions of plain data; the engine
(``together_clusters.drift.engine``, ``together_clusters.drift.sandbox``), the API (``together_clusters.drift.live``) and matplotlib (``together_clusters.drift.plot``) are
the shells.
"""
