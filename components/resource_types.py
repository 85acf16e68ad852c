"""The Pulumi type of every component: ``together:components:<Name>`` (a leaf: the shells and the installer,
:mod:`.cluster_controllers`, each name their type from it)."""

from __future__ import annotations

TYPE_PREFIX = "together:components"
