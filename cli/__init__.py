"""The ``together-clusters`` command line: one subpackage per command, over Pulumi stacks of Together GPU
clusters, on shared argument, output and exit-code helpers.

- ``together-clusters drift`` (``drift/``) compares the live resources with the code of one or more
  stacks (``pulumi preview --refresh`` through the Automation API, which writes no state) and sorts every
  difference into drift (changed outside the code), missing (deleted outside the code), changes pending
  (the code changed and is not deployed yet) and information that is normal on preemptible capacity
  (shortfall, preemption churn, workloads stalled for capacity).
- ``together-clusters status`` (``status/``) reports allocation, nodes, lifecycle events, savings and
  workloads per cluster.
- ``together-clusters drill`` (``drill/``) preempts one preemptible node (through the emulator's twin,
  or as a game day on a real cluster) and reports whether each workload on it survived.

Each command's ``command`` module holds its arguments (``add_parser``) and its ``run``; ``main`` only builds
the top parser from them and dispatches (``__main__``: ``python -m together_clusters.cli``). A command's
subpackage imports the shared modules here, never another command's subpackage; the shared modules import
no command. Shared: the exit codes, one table for every command (``exit_codes``), the argument
conventions (``arguments``), text tables (``table``), the engine (``workspace``, ``failure``), the stack's
export (``stack_state``), the API key a stack uses (``api_settings``), the clusters read from the API
(``live``) and their workloads from Kubernetes (``kube_view``), both classified purely (``capacity``,
``workloads``).
"""
