"""``together-clusters drill``: preempt one preemptible node (through the emulator's twin, or as a game day
on a real cluster), or have the platform remediate one node of either class through the compute API, and
report whether each workload on it survived.

``command`` holds the arguments and ``run``; ``modes`` the remediation modes the flag offers (pure, read by
the parser). What needs the Kubernetes client (the ``drill`` extra) loads only when a drill runs: ``safety``
(the plan, the pre-check, the confirmation before a drill touches a cluster) and ``runner`` (the preemption
or the remediation, and the watch). ``report`` is what the drill found, for people and machines.
"""
