"""``together-clusters status``: the capacity of a stack's clusters (allocation, nodes, repairs, events,
savings) and their workloads.

``command`` (the arguments and ``run``) reads the clusters from the state and the API (the shared ``live``,
``capacity`` and ``workloads``); ``repairs`` makes the rows of the node repairs (remediations) under way,
``timeline`` rebuilds each cluster's allocation over time, ``render`` prints it all for people and machines, and ``plot`` draws the timelines to a PNG (``--png``; matplotlib,
loaded only then).
"""
