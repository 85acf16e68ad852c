"""The remediation modes a drill can ask the compute API for: how ``--remediation`` spells each, the API's
name, what the platform does to the node and what it costs in capacity (the platform's words, from the SDK
and Together's node-repair guide; ``docs/concepts/remediations.md``). Pure, no third-party import: the
command's parser reads the choices before the drill's Kubernetes client loads."""

from __future__ import annotations

from typing import cast

from together_clusters.platform import (
    NODE_KEEPING_REMEDIATION_MODES,
    REMEDIATION_MODES_BY_NAME,
    remediation_mode_name,
)
from together_clusters.provider.vocabulary import RemediationMode

VM_ONLY: RemediationMode = "REMEDIATION_MODE_VM_ONLY"
HOST_AWARE: RemediationMode = "REMEDIATION_MODE_HOST_AWARE"
EVICT_WITHOUT_REPLACEMENT: RemediationMode = "REMEDIATION_MODE_EVICT_WITHOUT_REPLACEMENT"
REBOOT_VM: RemediationMode = "REMEDIATION_MODE_REBOOT_VM"
HOST_POWER_CYCLE: RemediationMode = "REMEDIATION_MODE_HOST_POWER_CYCLE"

# The platform's names are plain strings (it imports no typing of the API); these are the SDK's modes.
REMEDIATION_MODES = cast(dict[str, RemediationMode], REMEDIATION_MODES_BY_NAME)
"""``--remediation``'s choices and the API's mode each one asks for."""

NODE_KEEPING_MODES = NODE_KEEPING_REMEDIATION_MODES
"""The modes after which the same node comes back (a replacement may run on it again)."""

REMEDIATION_STEPS: dict[str, str] = {
    VM_ONLY: "cordons {node}, drains its pods, deletes the VM and provisions a new one on any host (a new "
    "instance and node name)",
    HOST_AWARE: "cordons the host of {node} (quarantine: its pods keep running), then drains them, deletes "
    "the VM and provisions a new one on another host (a new instance and node name)",
    EVICT_WITHOUT_REPLACEMENT: "cordons {node}, drains its pods and evicts the VM; nothing replaces it",
    REBOOT_VM: "cordons {node} and reboots the VM in place: expect its pods killed without a grace period; "
    "the same node comes back and is uncordoned",
    HOST_POWER_CYCLE: "cordons the host of {node} (quarantine: its pods keep running), then power-cycles it: "
    "expect its pods killed without a grace period; the same node comes back and is uncordoned",
}

CAPACITY: dict[str, str] = {
    VM_ONLY: "{gpus} GPU(s) out until the new instance's node joins",
    HOST_AWARE: "LOST: {gpus} GPU(s) from the quarantine until a new instance joins on another host (the "
    "cordoned host stays out of service; the new instance needs free capacity)",
    EVICT_WITHOUT_REPLACEMENT: "LOST for good: {gpus} GPU(s); the platform lowers the cluster's count, so it "
    "stays one node short until you scale it back up",
    REBOOT_VM: "{gpus} GPU(s) out until the node is back",
    HOST_POWER_CYCLE: "{gpus} GPU(s) out from the quarantine until the node is back",
}


short_mode = remediation_mode_name


def remediation_steps(mode: str, node: str) -> str:
    """What the platform does to ``node`` in ``mode``, one clause."""
    return REMEDIATION_STEPS.get(mode, "remediates {node}").format(node=node)


def capacity_text(mode: str, gpus: float) -> str:
    """What the remediation costs the cluster in capacity, one line."""
    return CAPACITY.get(mode, "{gpus} GPU(s) out while it runs").format(gpus=f"{gpus:g}")
