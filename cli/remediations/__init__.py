"""``together-clusters remediations``: a cluster's node repairs, and the gate that approves one only once the
node's work has checkpointed and moved.

``command`` holds the arguments and ``run``; ``plan`` decides (pure), ``cluster`` reads and acts on the
Kubernetes API, ``gate`` runs the approval, ``render`` prints. Everything but ``command`` needs the Kubernetes
client (the ``remediations`` extra) and loads only when a command runs.
"""
