"""SIGTERM to a simulated pod's containers without deleting the pod: the annotation kwok's stages act on
(:data:`~together_clusters.emulator.kubernetes.kwok_config.SIGTERM`). The twin passes it to the preemption
sequence (:class:`together_clusters.sequences.preemption.PodSignal`) for ``TerminationMode.SIGNAL``."""

from __future__ import annotations

import time

from kubernetes.client import CoreV1Api, V1Pod

from together_clusters.sequences.preemption import name_of, rfc3339

from .kwok_config import SIGTERM


class KwokSignal:
    """The :class:`~together_clusters.sequences.preemption.PodSignal` of kwok's nodes."""

    def sent(self, pod: V1Pod) -> bool:
        """Whether the SIGTERM annotation is on the pod already."""
        return SIGTERM in ((pod.metadata.annotations if pod.metadata is not None else None) or {})

    def send(self, core: CoreV1Api, pod: V1Pod) -> None:
        """Annotate the pod: kwok ends its containers as SIGTERM would."""
        name, namespace = name_of(pod)
        core.patch_namespaced_pod(
            name,
            namespace,
            {"metadata": {"annotations": {SIGTERM: rfc3339(time.time())}}},
            _request_timeout=10,
        )


KWOK_SIGNAL = KwokSignal()
