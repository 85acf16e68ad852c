"""``python -m together_clusters.cli``: the same as the ``together-clusters`` command."""

from .main import main

raise SystemExit(main())
