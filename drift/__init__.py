"""Drift detection and capacity status for Pulumi stacks of Together GPU clusters.

``together-clusters drift`` compares the live resources with the code of one or more stacks
(``pulumi preview --refresh`` through the Automation API, which writes no state) and sorts every
difference into drift (changed outside the code), missing (deleted outside the code), changes pending
(the code changed and is not deployed yet) and information that is normal on preemptible capacity
(shortfall, preemption churn). ``together-clusters status`` reports allocation, nodes, lifecycle events
and savings per cluster.

Pure cores: the classification (``classify``), the results of a fleet (``results``), the capacity figures
(``capacity``, ``timeline``) and the renderings (``drift_render``, ``junit``, ``markdown``,
``status_render``). Shells: the engine (``workspace``, ``observe``, ``fleet``), the API (``live``) and
matplotlib (``plot``).
"""

if not __name__.startswith("together_clusters."):  # a second copy: see together_clusters/_identity.py
    from together_clusters._identity import refuse

    refuse(__name__)
