"""``python -m together_clusters.drift``: the same as the ``together-clusters`` command."""

from .cli import main

raise SystemExit(main())
