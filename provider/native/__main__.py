"""``python -m together_clusters.provider.native ENGINE_ADDRESS``: the plugin, as its launcher starts it."""

from together_clusters.provider.native.serve import main

main()
