"""Component arguments to Kubernetes objects, as plain dicts in the API's own field names (pure).

Every function here is a plain function of plain data: the components feed the result to the
guard and then to pulumi-kubernetes, and the tests read it directly. One module per workload
(``batch_job``, ``sweep``, ``training_run``, ``batch_inference``, ``checkpoint_store``), over the
pieces they share: ``common`` (labels, metadata, env entries), ``run_keys``, ``checkpoints`` (how a pod
reaches its checkpoint storage), ``pods`` (containers and pod specs), ``jobs`` (Jobs, attempt JobSets) and
``awaiting`` (what ``pulumi up`` waits for).
This package re-exports every public name, so ``from together_clusters.components.manifests import X``
keeps working.
"""

from __future__ import annotations

from together_clusters.platform import GPU_RESOURCE

from ..placement import Placement, placement_for, standard_placement
from .awaiting import DEPLOYMENT_ACCEPTED_ANNOTATIONS, JOB_READY_ANNOTATIONS, WAIT_FOR_ANNOTATION
from .batch_inference import DEFAULT_PRE_STOP_SECONDS, batch_inference
from .batch_job import batch_job
from .checkpoint_store import checkpoint_store
from .checkpoints import CheckpointBinding, checkpoint_binding
from .common import (
    CHECKPOINT_VOLUME,
    COMPLETION_INDEX_ANNOTATION,
    MAIN_CONTAINER,
    RESERVED_ENV,
    RUN_KEY_DIGEST_CHARS,
    RUN_KEYS_FILE,
    TRIALS_FILE,
    TRIALS_MOUNT_PATH,
    TRIALS_VOLUME,
    Manifest,
    labels_for,
    pod_annotations,
    selector_for,
)
from .jobs import (
    ATTEMPT_REPLICATED_JOB,
    DISRUPTION_RULE,
    DNS_LABEL,
    DNS_LABEL_MAX,
    JOBSET_FAILURE_POLICY,
    POD_NAME_SUFFIX,
    PREEMPTED_EXIT_RULE,
    AttemptLimits,
    attempt_job_set,
    pod_failure_policy,
)
from .pods import RESERVED_VOLUMES, SHM_MOUNT_PATH, SHM_VOLUME, container, container_volumes, pod_spec
from .run_keys import (
    DEFERRED_DIGEST_END,
    DEFERRED_DIGEST_START,
    INPUT_MARK,
    finish_deferred_digests,
    run_definition,
    run_key,
)
from .sweep import sweep, trial_job_sets, trial_run_keys, trials_config_map_data, trials_config_map_name
from .training_run import (
    TORCHRUN_RDZV_BACKEND,
    coordinator_host,
    fleet_coordinator_name,
    torchrun_env,
    training_run,
)

__all__ = [
    "ATTEMPT_REPLICATED_JOB",
    "AttemptLimits",
    "CHECKPOINT_VOLUME",
    "COMPLETION_INDEX_ANNOTATION",
    "CheckpointBinding",
    "DEFAULT_PRE_STOP_SECONDS",
    "DEFERRED_DIGEST_END",
    "DEPLOYMENT_ACCEPTED_ANNOTATIONS",
    "DEFERRED_DIGEST_START",
    "DISRUPTION_RULE",
    "DNS_LABEL",
    "DNS_LABEL_MAX",
    "GPU_RESOURCE",
    "INPUT_MARK",
    "JOBSET_FAILURE_POLICY",
    "JOB_READY_ANNOTATIONS",
    "MAIN_CONTAINER",
    "Manifest",
    "POD_NAME_SUFFIX",
    "PREEMPTED_EXIT_RULE",
    "Placement",
    "RESERVED_ENV",
    "RESERVED_VOLUMES",
    "RUN_KEYS_FILE",
    "RUN_KEY_DIGEST_CHARS",
    "SHM_MOUNT_PATH",
    "SHM_VOLUME",
    "TORCHRUN_RDZV_BACKEND",
    "TRIALS_FILE",
    "TRIALS_MOUNT_PATH",
    "TRIALS_VOLUME",
    "WAIT_FOR_ANNOTATION",
    "attempt_job_set",
    "batch_inference",
    "batch_job",
    "checkpoint_binding",
    "checkpoint_store",
    "container",
    "container_volumes",
    "coordinator_host",
    "fleet_coordinator_name",
    "finish_deferred_digests",
    "labels_for",
    "placement_for",
    "pod_annotations",
    "pod_failure_policy",
    "pod_spec",
    "run_definition",
    "run_key",
    "selector_for",
    "standard_placement",
    "sweep",
    "torchrun_env",
    "training_run",
    "trial_job_sets",
    "trial_run_keys",
    "trials_config_map_data",
    "trials_config_map_name",
]
