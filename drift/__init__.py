"""The ``together-clusters`` command line: three commands, side by side, over Pulumi stacks of Together GPU clusters.

- ``together-clusters drift`` (``drift_command``) compares the live resources with the code of one or more
  stacks (``pulumi preview --refresh`` through the Automation API, which writes no state) and sorts every
  difference into drift (changed outside the code), missing (deleted outside the code), changes pending
  (the code changed and is not deployed yet) and information that is normal on preemptible capacity
  (shortfall, preemption churn).
- ``together-clusters status`` (``status_command``) reports allocation, nodes, lifecycle events and savings
  per cluster.
- ``together-clusters drill`` (``drill_command``) preempts one preemptible node (through the emulator's twin,
  or as a game day on a real cluster) and reports whether each workload on it survived.

``cli`` only builds the top parser from the three command modules and dispatches; ``arguments`` holds the
conventions they share. Pure cores: the classification (``classify``), the results of a fleet (``results``),
the capacity figures (``capacity``, ``timeline``), the drill's report (``drill_report``) and the renderings
(``drift_report``, ``junit``, ``markdown``, ``status_render``). Shells: the engine (``workspace``,
``observe``, ``fleet``), the API (``live``), Kubernetes (``drill``; ``drill_safety`` holds the plan, the pre-check and the
confirmation before a drill touches a cluster) and matplotlib (``plot``).
"""

if not __name__.startswith("together_clusters."):  # a second copy: see together_clusters/_identity.py
    from together_clusters._identity import refuse

    refuse(__name__)
