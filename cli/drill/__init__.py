"""``together-clusters drill``: preempt one preemptible node (through the emulator's twin, or as a game day
on a real cluster) and report whether each workload on it survived.

``command`` holds the arguments and ``run``; what needs the Kubernetes client (the ``drill`` extra) loads
only when a drill runs: ``safety`` (the plan, the pre-check, the confirmation before a drill touches a
cluster) and ``runner`` (the preemption and the watch). ``report`` is what the drill found, for people and
machines.
"""
