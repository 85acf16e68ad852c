"""``together-clusters drift``: the live resources against the code of one or more stacks, without writing
any state.

``command`` (the arguments and ``run``) checks a fleet of stacks side by side (``fleet``: one result per
stack, ``results`` their exit codes); each stack is read by the engine (``observe``: preview with refresh,
export, history), sorted purely (``classify``, with ``baseline`` telling drift from a pending change) and
its stalled workloads added (``workload_check``). The reports: text and JSON (``report``), JUnit XML
(``junit``) and Markdown (``markdown``).
"""
