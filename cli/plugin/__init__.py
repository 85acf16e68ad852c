"""``together-clusters plugin``: the native provider plugin ``together`` put where every Pulumi program finds it.

``command`` (the arguments and ``run``) installs the plugin's launcher into Pulumi's plugin cache through
``pulumi plugin install``, with this interpreter written into it.
"""
