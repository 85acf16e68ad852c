"""A local emulator of Together's GPU cluster compute API (``/v1/compute``), preemptible capacity included.

Run it with ``python -m together_clusters.emulator --port 0`` (the first line printed is the base URL, without ``/v1``) or
in-process with :func:`together_clusters.emulator.server.start_emulator`. Tests steer it through the admin API under
``/_emulator`` (see :mod:`together_clusters.emulator.admin` and :class:`together_clusters.emulator.admin_client.AdminClient`).

Modules: ``shapes`` (the API's requests and replies, from the official SDK's types), ``catalog`` (regions,
GPU types, drivers), ``lifecycle`` (emulated durations and schedules), ``records`` (stored state),
``validation`` (the service's request rules), ``intake`` (requests into records), ``simulation`` (nodes,
pools and timed actions), ``remediations`` (the node remediations' state machine), ``faults`` (injected
faults), ``state`` (the platform's atomic operations), ``render`` (records as the API's JSON), ``store``
(SQLite), ``auth`` (API keys, ``/v3/whoami``), ``app``/``admin`` (HTTP), ``injector`` (request ids and
HTTP faults in front of the app), ``server`` (background thread), ``__main__`` (CLI).
"""

