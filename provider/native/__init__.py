"""The native provider plugin ``together`` (``pulumi-resource-together``): the second front door to the clusters
and volumes, for every Pulumi language, beside the dynamic provider of ``..resource`` (Python only).

Both doors call the same functions (``planning.check``/``diff``, ``operations.*``, ``volume_operations.*``);
this package only translates the engine's wire to and from them, one job per module:

- ``wire``: camelCase <-> snake_case names, ``PropertyValue`` <-> plain values (unknowns, numbers, secrets),
  and a component's wire arguments -> its argument dataclasses;
- ``provider``: the ``Provider`` of Pulumi's experimental interface, one method per engine call (``construct``
  for the workload components: the Python component, its arguments from the wire);
- ``serve``: the SDK's server started with the mends its interface needs (one-line errors);
- ``__main__``: what the launcher ``plugin/pulumi-resource-together`` runs.
"""
