"""The engine's wire, as the shared provider functions read and write it.

The plugin receives ``PropertyValue`` maps with the package schema's camelCase names (``numGpus``); the rules
and operations both front doors share take plain dicts with the API's snake_case names (``num_gpus``), as the
dynamic provider has them. The mends for Pulumi's experimental interface (SDK 3.272 and later) live here:

- an unknown value (preview of an input that is another resource's output) arrives as ``Computed`` or as the
  raw sentinel string, and ``PropertyValue.computed()`` cannot be marshalled back: both ways it is
  ``pulumi.runtime.rpc.UNKNOWN``, the string the rules already test with ``is_unknown``;
- the wire has one number type, so ``8`` arrives as ``8.0`` (``planning.whole_numbers``), and ``PropertyValue``
  takes floats only, so an ``int`` goes back as a float;
- a secret is unwrapped on the way in, and the outputs the schema marks secret (``kubeConfig``) are wrapped on
  the way out;
- keys starting with ``__`` (the dynamic provider's pickled ``__provider`` in a state that moved to the
  native type) are no input of anyone's and are dropped.

A workload component's arguments (``construct``) are read otherwise: :func:`to_values` keeps every name as
given (an env variable's, a label's, ``rdma/ib``), an unknown or secret leaf becomes an ``Output`` the
component resolves as it resolves a Python program's (its text fields only: a field the guard checks must be
known), and :func:`workload_args` builds the component's own argument dataclasses from them, by the same
annotations the package schema's types are written from.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar, get_args, get_origin

import pulumi
from pulumi.provider.experimental.property_value import Computed, PropertyValue
from pulumi.runtime.rpc import UNKNOWN

from together_clusters.errors import ArgsError

from ..package_schema import (
    CHECKPOINT_CHOICES,
    camel,
    is_checkpoint_choice,
    is_queue,
    is_scalar_choice,
    secret_fields,
    snake,
    without_none,
    workload_fields,
)
from ..planning import whole_numbers

__all__ = [
    "camel",
    "from_output",
    "in_schema_names",
    "keyword_args",
    "snake",
    "to_plain",
    "to_values",
    "to_wire",
    "workload_args",
]

T = TypeVar("T")


def in_schema_names(message: str, names: Iterable[str]) -> str:
    """A rule's message as a program of the plugin reads it: each of ``names`` (snake_case field names the rules
    write, ``num_gpus``) in the schema's spelling (``numGpus``), whole words only."""
    multi_word = sorted({n for n in names if "_" in n}, key=len, reverse=True)
    if not multi_word:
        return message
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, multi_word)) + r")\b")
    return pattern.sub(lambda found: camel(found.group(1)), message)


def to_plain(properties: Mapping[str, PropertyValue]) -> dict[str, Any]:
    """Plain snake_case values from the engine's map: unknowns as ``UNKNOWN``, whole numbers as ``int``."""
    return {snake(key): _plain(value) for key, value in properties.items() if not key.startswith("__")}


def _plain(value: PropertyValue) -> Any:
    inner = value.value
    if isinstance(inner, Computed):
        return UNKNOWN
    if isinstance(inner, Mapping):
        return to_plain(inner)
    if isinstance(inner, tuple):
        return [_plain(item) for item in inner]
    return whole_numbers(inner)


def to_wire(values: Mapping[str, Any], secrets: Iterable[str] = ()) -> dict[str, PropertyValue]:
    """The engine's map from plain snake_case values: camelCase names, ``secrets`` (snake_case names) secret."""
    secret = set(secrets)
    return {
        camel(key): _wire(value).with_secret(key in secret and value is not None)
        for key, value in values.items()
        if not key.startswith("__")
    }


def _wire(value: Any) -> PropertyValue:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return PropertyValue(value)  # UNKNOWN included: the engine reads the sentinel string as unknown
    if isinstance(value, int | float):
        return PropertyValue(float(value))
    if isinstance(value, Mapping):
        return PropertyValue(to_wire(value))
    if isinstance(value, list | tuple):
        return PropertyValue([_wire(item) for item in value])
    raise TypeError(f"no wire form for {type(value).__name__}: {value!r}")


# --- a workload component's arguments and outputs (construct) ----------------------------------------------


def to_values(properties: Mapping[str, PropertyValue]) -> dict[str, Any]:
    """Python values from the engine's map, every name kept: an unknown leaf as an unknown ``Output``, a
    secret one as a secret ``Output``, whole numbers as ``int``."""
    return {key: _value(value, secret=False) for key, value in properties.items()}


def _value(value: PropertyValue, *, secret: bool) -> Any:
    secret = secret or value.is_secret
    inner = value.value
    if isinstance(inner, Computed) or inner == UNKNOWN:
        return _known_output(None, known=False, secret=secret)
    if isinstance(inner, Mapping):
        return {key: _value(item, secret=secret) for key, item in inner.items()}
    if isinstance(inner, tuple):
        return [_value(item, secret=secret) for item in inner]
    plain = whole_numbers(inner)
    return _known_output(plain, known=True, secret=True) if secret else plain


def _known_output(value: Any, *, known: bool, secret: bool) -> pulumi.Output[Any]:
    loop = asyncio.get_running_loop()

    def resolved(result: Any) -> asyncio.Future[Any]:
        future = loop.create_future()
        future.set_result(result)
        return future

    return pulumi.Output(set(), resolved(value), resolved(known), resolved(secret))


def workload_args(cls: type[T], values: Mapping[str, Any], owner: str) -> T:
    """The argument dataclass ``cls`` of the component ``owner`` from its wire values (camelCase names, as
    :func:`to_values` gives them); every problem found raised at once as one :class:`ArgsError`."""
    problems: list[str] = []
    args = _build(cls, values, "", problems)
    if problems:
        raise ArgsError(owner, problems)
    return args  # type: ignore[no-any-return]


def keyword_args(
    keywords: Mapping[str, tuple[Any, str]], values: dict[str, Any], owner: str
) -> dict[str, Any]:
    """The keyword inputs of the component ``owner`` (snake_case names) taken out of its wire ``values``, each
    checked against its type; every problem found raised at once as one :class:`ArgsError`."""
    problems: list[str] = []
    given = {name: values.pop(camel(name)) for name in keywords if camel(name) in values}
    taken = {
        name: _build(keywords[name][0], value, camel(name), problems)
        for name, value in given.items()
        if value is not None
    }
    if problems:
        raise ArgsError(owner, problems)
    return taken


def _build(hint: Any, value: Any, path: str, problems: list[str]) -> Any:
    hint, _ = without_none(hint)
    if value is None:
        return None
    if isinstance(value, pulumi.Output):
        if hint is not str and not is_queue(hint):
            problems.append(
                f"{path}: must be known at preview (the placement guard checks it), not another resource's output"
            )
        return value
    if is_checkpoint_choice(hint):
        return _checkpoint(value, get_args(hint), path, problems)
    if hint is Any:  # a trial's parameters: whatever JSON the program gives
        return value
    if is_scalar_choice(hint):
        if isinstance(value, get_args(hint)) and not isinstance(value, bool):
            return value
        kinds = " or ".join("a string" if k is str else f"an {k.__name__}" for k in get_args(hint))
        problems.append(f"{path}: {value!r} is not {kinds}")
        return None
    if hint is str or is_queue(hint):
        return _expect(value, str, path, problems)
    if hint in (bool, int, float):
        return _expect(value, hint, path, problems)
    origin = get_origin(hint)
    if origin in (Mapping, dict) and isinstance(value, Mapping):
        item = get_args(hint)[1]
        return {key: _build(item, v, f"{path}.{key}", problems) for key, v in value.items()}
    if origin in (tuple, list, Sequence) and isinstance(value, list):
        item = get_args(hint)[0]
        return tuple(_build(item, v, f"{path}[{i}]", problems) for i, v in enumerate(value))
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        try:
            return hint(value)
        except ValueError:
            allowed = ", ".join(str(member.value) for member in hint)
            problems.append(f"{path}: {value!r} is none of {allowed}")
            return None
    if isinstance(hint, type) and dataclasses.is_dataclass(hint) and isinstance(value, Mapping):
        return _dataclass(hint, value, path, problems)
    problems.append(f"{path or 'arguments'}: {value!r} is not a {getattr(hint, '__name__', hint)}")
    return None


def _expect(value: Any, kind: type, path: str, problems: list[str]) -> Any:
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        problems.append(f"{path}: {value!r} is not a {'string' if kind is str else kind.__name__}")
    return value


def _dataclass(cls: type, values: Mapping[str, Any], path: str, problems: list[str]) -> Any:
    fields = workload_fields(cls)
    by_wire_name = {camel(name): name for name in fields}
    unknown = sorted(set(values) - set(by_wire_name))
    if unknown:
        problems.append(
            f"{path or cls.__name__}: no argument {', '.join(unknown)}; it has {', '.join(by_wire_name)}"
        )
    given = {
        by_wire_name[key]: _build(fields[by_wire_name[key]][0], value, f"{path}.{key}".lstrip("."), problems)
        for key, value in values.items()
        if key in by_wire_name and value is not None
    }
    missing = [
        camel(name)
        for name, (_, optional, has_default) in fields.items()
        if not (optional or has_default) and name not in given
    ]
    if missing:
        problems.append(f"{path or cls.__name__}: {', '.join(missing)} must be given")
    if problems:
        return None
    # A secret field stays secret even when the program gave it in plain text (a YAML literal): as the
    # schema's ``secret`` makes every SDK send it.
    secrets = secret_fields(cls)
    given |= {
        name: _known_output(value, known=True, secret=True)
        for name, value in given.items()
        if name in secrets and not isinstance(value, pulumi.Output)
    }
    # The wire leaves out a field it was not given: the dataclass's own default (a workload's, such as a
    # Sweep's Retries(backoff_limit=2)) applies; an optional field without a default is None.
    given |= {
        name: None
        for name, (_, optional, has_default) in fields.items()
        if optional and not has_default and name not in given
    }
    return cls(**given)


def _checkpoint(value: Any, classes: tuple[type, ...], path: str, problems: list[str]) -> Any:
    """One of the checkpoint ``classes`` the field takes (a CheckpointStore's storage takes no noCheckpoint)."""
    if not isinstance(value, Mapping):
        problems.append(f"{path}: {value!r} is not an object")
        return None
    allowed = [name for name, cls in CHECKPOINT_CHOICES.items() if cls in classes]
    chosen = [name for name in allowed if value.get(name) is not None]
    others = sorted(set(value) - set(allowed))
    if len(chosen) != 1 or others:
        problems.append(
            f"{path}: give exactly one of {', '.join(allowed)}"
            + (f" (given: {', '.join(chosen + others)})" if chosen or others else " (given: none)")
        )
        return None
    (name,) = chosen
    return _build(CHECKPOINT_CHOICES[name], value[name], f"{path}.{name}", problems)


async def from_output(output: Any) -> PropertyValue:
    """The engine's value of a component's output: unknown as the sentinel, secret kept, and the URNs of the
    resources it comes from as its dependencies."""
    if not isinstance(output, pulumi.Output):
        return _wire(output)
    known, secret = await output.is_known(), await output.is_secret()
    value = await output.future(with_unknowns=True)
    wired = _wire(value) if known else PropertyValue(UNKNOWN)
    urns = [await resource.urn.future() for resource in await output.resources()]
    return wired.with_secret(secret).with_dependencies(urn for urn in urns if urn)
