"""The checks every workload's arguments share, each returning violations rather than raising (pure).

Each workload module's ``argument_violations`` gathers these with its own, so one error lists every
problem of the arguments at once; :func:`refuse_invalid` raises it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from together_clusters.errors import ArgsError
from together_clusters.platform import GPU_RESOURCE

from ..args import Checkpointing, ContainerSpec, PodSettings, Retries
from ..checkpoint import contract
from ..violations import Violation, argument_violation
from .common import RESERVED_ENV
from .jobs import ATTEMPT_REPLICATED_JOB, DNS_LABEL, DNS_LABEL_MAX, longest_pod_name
from .pods import probe_action, taken_volume_names, volume_sources
from .run_keys import run_id_names_a_directory


def refuse_invalid(owner: str, found: Sequence[Violation]) -> None:
    """Raise one :class:`ArgsError` naming ``owner`` and listing every violation, if there is any."""
    if found:
        raise ArgsError(owner, found)


def at_least(field: str, value: int, minimum: int) -> list[Violation]:
    """A count or a number of seconds below its least value."""
    if value >= minimum:
        return []
    return [
        argument_violation(
            "at-least",
            field,
            value,
            f"{field} must be >= {minimum}, got {value}",
            f"set {field}={minimum} or more",
        )
    ]


def within(rule: str, field: str, value: int, low: int, high: int, problem: str, fix: str) -> list[Violation]:
    """A value outside ``low`` to ``high`` (``problem`` names the field, the value and the range)."""
    return [] if low <= value <= high else [argument_violation(rule, field, value, problem, fix)]


def shared_settings_violations(
    pod: PodSettings, retries: Retries | None = None, checkpointing: Checkpointing | None = None
) -> list[Violation]:
    """The checks of the settings groups several workloads share (see ``args.py``)."""
    found = at_least("grace_period_seconds", pod.grace_period_seconds, 1)
    if retries is not None:
        found += exit_code_violations(retries.non_retriable_exit_codes)
    if checkpointing is not None:
        found += run_id_violations(checkpointing.run_id)
    return found


def container_violations(
    spec: ContainerSpec, own_annotations: Mapping[str, str] | None = None, field: str = "container"
) -> list[Violation]:
    """A container's options that contradict each other or what the component sets itself."""
    return [
        *_clashes_with_the_component(spec, own_annotations, field),
        *_probe_violations(spec, field),
        *_volume_violations(spec, field),
    ]


def _clashes_with_the_component(
    spec: ContainerSpec, own_annotations: Mapping[str, str] | None, field: str
) -> list[Violation]:
    """Annotations, env and resources the component sets itself (or that the spec sets twice)."""
    found: list[Violation] = []
    annotation_clashes = sorted(set(spec.pod_annotations).intersection(own_annotations or {}))
    if annotation_clashes:
        found.append(
            argument_violation(
                "own-annotation",
                f"{field}.pod_annotations",
                annotation_clashes,
                f"pod_annotations sets {', '.join(annotation_clashes)}, which the component sets itself",
                "leave it out: the component's arguments (checkpoint=...) set it",
            )
        )
    env_clashes = sorted(RESERVED_ENV.intersection(spec.env))
    if env_clashes:
        found.append(
            argument_violation(
                "own-env",
                f"{field}.env",
                env_clashes,
                f"container env sets {', '.join(env_clashes)}, which the component sets itself",
                "use the component's arguments instead",
            )
        )
    secret_clashes = sorted(
        RESERVED_ENV.intersection(spec.secret_env) | set(spec.env).intersection(spec.secret_env)
    )
    if secret_clashes:
        found.append(
            argument_violation(
                "secret-env-twice",
                f"{field}.secret_env",
                secret_clashes,
                f"secret_env sets {', '.join(secret_clashes)}, which env or the component sets already",
                "set each variable in one place",
            )
        )
    if GPU_RESOURCE in spec.resources:
        gpus = spec.resources[GPU_RESOURCE]
        found.append(
            argument_violation(
                "gpu-resource",
                f"{field}.resources",
                dict(spec.resources),
                f"resources sets {GPU_RESOURCE}",
                f"use gpus={gpus} instead",
            )
        )
    return found


def _probe_violations(spec: ContainerSpec, field: str) -> list[Violation]:
    """Probes whose fields say no one kind of probe."""
    found: list[Violation] = []
    for probe_field in ("readiness_probe", "liveness_probe", "startup_probe"):
        probe = getattr(spec, probe_field)
        if probe is not None and probe_action(probe) is None:
            found.append(
                argument_violation(
                    "probe-kind",
                    f"{field}.{probe_field}",
                    probe,
                    f"{field}.{probe_field}={probe} is not one kind of probe",
                    "give http_path with port (HTTP), port alone (TCP), or command (exec)",
                )
            )
    return found


def _volume_violations(spec: ContainerSpec, field: str) -> list[Violation]:
    """Data volumes without exactly one source, or with a name already taken."""
    found: list[Violation] = []
    for volume in spec.volumes:
        given = sorted(volume_sources(volume))
        if len(given) != 1:
            found.append(
                argument_violation(
                    "volume-source",
                    f"{field}.volumes",
                    volume.name,
                    f"volume {volume.name!r} has {len(given)} sources ({', '.join(given) or 'none'})",
                    "give exactly one of claim_name, config_map, secret, host_path",
                )
            )
    taken = taken_volume_names(spec)
    if taken:
        found.append(
            argument_violation(
                "volume-name",
                f"{field}.volumes",
                taken,
                f"volume names {taken} are taken (by the component or twice)",
                "rename them",
            )
        )
    return found


def exit_code_violations(non_retriable_exit_codes: Sequence[int]) -> list[Violation]:
    """Exit codes that must never end a run: success, and the checkpointed SIGTERM."""
    codes = tuple(non_retriable_exit_codes)
    if 0 not in codes and contract.PREEMPTED_EXIT_CODE not in codes:
        return []
    return [
        argument_violation(
            "exit-codes",
            "non_retriable_exit_codes",
            codes,
            f"non_retriable_exit_codes={codes}: 0 is success and {contract.PREEMPTED_EXIT_CODE} is a "
            "checkpointed SIGTERM",
            "leave both out",
        )
    ]


def run_id_violations(run_id: str | None) -> list[Violation]:
    """A run_id that cannot name a directory of its own."""
    if run_id is None or run_id_names_a_directory(run_id):
        return []
    return [
        argument_violation(
            "run-id",
            "run_id",
            run_id,
            f"run_id={run_id!r} cannot name a directory",
            "use a non-empty name without '/' or a leading '.'",
        )
    ]


def job_set_name_violations(
    field: str,
    given: str,
    job_set_name: str,
    completions: int = 1,
    job: str = ATTEMPT_REPLICATED_JOB,
    attempts_optional: bool = True,
) -> list[Violation]:
    """A name whose JobSet (``job_set_name``, made from ``given``) would name the pods of its replicated Job
    ``job`` (an attempt JobSet's one Job by default) in a way Kubernetes refuses. ``attempts_optional``: the
    workload runs without a JobSet when ``fresh_job_per_attempt`` is off (the fix says so)."""
    longest = longest_pod_name(job_set_name, completions, job)
    if len(longest) <= DNS_LABEL_MAX and DNS_LABEL.fullmatch(longest):
        return []
    room = len(given) + DNS_LABEL_MAX - len(longest)
    return [
        argument_violation(
            "job-set-name",
            field,
            given,
            f"{field}={given!r}: its JobSet {job_set_name!r} would name pods like {longest!r} "
            f"({len(longest)} characters), which Kubernetes refuses (a DNS label: at most {DNS_LABEL_MAX} "
            "characters of lowercase letters, digits and '-', starting with a letter)",
            f"use a name of at most {room} characters that starts with a letter"
            + (", or set retries=Retries(fresh_job_per_attempt=False)" if attempts_optional else ""),
        )
    ]
