"""Strict decoding of plugin args: a profile's ``pluginConfig[i].args`` into a plugin's typed args.

kube-scheduler decodes each ``pluginConfig`` entry into the ``<Plugin>Args`` type its scheme knows
(strictly: an unknown field is an error), applies the v1 defaults and then validates it
(validation_pluginargs.go); a plugin's factory receives that typed object, never a map. kplane
does the same in Python: every in-tree plugin that takes args declares, next to its code, a
frozen ``<Plugin>Args`` dataclass whose defaults are kube-scheduler's v1 defaults and a
``decode_args(raw, path) -> <Plugin>Args``; ``scheduler.config`` calls it while parsing the
configuration, so a bad value stops the scheduler before it connects to anything.

This module holds what those decoders share: ``ArgsError`` (its message starts with the field's
full path, e.g. ``profiles[0].pluginConfig[0].args.scoringStrategyy: unknown field
"scoringStrategyy"``), readers for each JSON type that name the path on a wrong type, the
``apiVersion``/``kind`` check, protobuf fields (``addedAffinity``, ``defaultConstraints``)
decoded strictly, and ``ResourceSpec``, which two plugins' args use.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, TypeVar

from google.protobuf.message import Message

from machinery import jsonconv

API_VERSION = "kubescheduler.config.k8s.io/v1"
_TYPE_META = ("apiVersion", "kind")
_INT32 = (-(2**31), 2**31 - 1)

T = TypeVar("T")
M = TypeVar("M", bound=Message)


class ArgsError(ValueError):
    """Plugin args the plugin cannot run with; the message starts with the field's full path."""


def join(path: str, key: str) -> str:
    """``path.key``, or ``key`` at the top."""
    return f"{path}.{key}" if path else key


def _here(path: str) -> str:
    return path or "args"


# ---------------------------------------------------------------- the args object


def fields(raw: Any, path: str, plugin: str, allowed: Iterable[str]) -> dict[str, Any]:
    """The args mapping without its type meta; unknown fields and a wrong ``kind`` are errors.

    ``raw`` None (no ``pluginConfig`` entry, or ``args`` left out) is an empty mapping: every
    field takes its default.
    """
    if raw is None:
        return {}
    out = dict(mapping(raw, path))
    api_version = out.pop("apiVersion", None)
    if api_version is not None and api_version != API_VERSION:
        raise ArgsError(f'{join(path, "apiVersion")}: Unsupported value: "{api_version}": supported values: '
                        f'"{API_VERSION}"')
    kind = out.pop("kind", None)
    if kind is not None and kind != f"{plugin}Args":
        raise ArgsError(f'{join(path, "kind")}: Invalid value: "{kind}": args for plugin {plugin} must be of '
                        f'kind {plugin}Args')
    check_fields(out, allowed, path)
    return out


def check_fields(raw: Mapping[str, Any], allowed: Iterable[str], path: str) -> None:
    """An unknown field is an error naming its path (scheduler.config's wording)."""
    known = set(allowed)
    for key in raw:
        if key not in known:
            raise ArgsError(f'{join(path, str(key))}: unknown field "{key}"')


def no_args(plugin: str, args: Any, path: str = "") -> None:
    """For a plugin that takes no args: anything given beyond the type meta is an error."""
    if args is None:
        return
    if isinstance(args, Mapping) and not any(k not in _TYPE_META for k in args):
        return
    raise ArgsError(f'{_here(path)}: Forbidden: plugin "{plugin}" takes no args')


def typed(args: Any, args_type: type[T], decode: Callable[[Any, str], T], plugin: str) -> T:
    """What a plugin factory is given, as its args type: the decoded object itself, or a raw
    mapping (or None, for the defaults) decoded strictly here — for tests and other callers that
    hold raw args. Another type is refused, as kube-scheduler's factories refuse it."""
    if isinstance(args, args_type):
        return args
    if args is None or isinstance(args, Mapping):
        return decode(args, "")
    raise ArgsError(f"want args of type {args_type.__name__} for plugin {plugin}, got {type(args).__name__}")


# ---------------------------------------------------------------- values


def mapping(value: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ArgsError(f"{_here(path)}: Invalid value: {value!r}: must be a mapping")
    return value


def listing(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list | tuple):
        raise ArgsError(f"{_here(path)}: Invalid value: {value!r}: must be a list")
    return list(value)


def integer(value: Any, path: str, *, int32: bool = True) -> int:
    """A JSON integer (an integral float such as ``5.0`` counts); in int32 range by default, as the
    Go field it stands for."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgsError(f"{_here(path)}: Invalid value: {value!r}: must be an integer")
    if int32 and not _INT32[0] <= value <= _INT32[1]:
        raise ArgsError(f"{_here(path)}: Invalid value: {value}: must be a 32-bit integer")
    return value


def boolean(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise ArgsError(f"{_here(path)}: Invalid value: {value!r}: must be a boolean")
    return value


def string(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise ArgsError(f"{_here(path)}: Invalid value: {value!r}: must be a string")
    return value


def strings(value: Any, path: str) -> tuple[str, ...]:
    """A list of strings; null or absent is empty."""
    if value is None:
        return ()
    return tuple(string(v, f"{path}[{i}]") for i, v in enumerate(listing(value, path)))


_UNKNOWN = re.compile(r'^strict decoding error: unknown field "(.+)"$')
_INVALID = re.compile(r'^invalid value for field "(.+?)": (.+)$')


def message(message_type: type[M], value: Any, path: str) -> M:
    """A Kubernetes API object (a protobuf message) decoded strictly from its JSON form, with
    errors in this module's wording."""
    if not isinstance(value, Mapping):
        raise ArgsError(f"{_here(path)}: Invalid value: {value!r}: must be a {message_type.DESCRIPTOR.name} mapping")
    try:
        return jsonconv.from_dict(message_type, dict(value), path)
    except jsonconv.DecodeError as exc:
        text = str(exc)
        m = _UNKNOWN.match(text)
        if m:
            where = m.group(1)
            key = where.rsplit(".", 1)[-1]
            raise ArgsError(f'{where}: unknown field "{key}"') from None
        m = _INVALID.match(text)
        if m:
            raise ArgsError(f"{m.group(1)}: Invalid value: {m.group(2)}") from None
        raise ArgsError(f"{_here(path)}: Invalid value: {text}") from None


# ---------------------------------------------------------------- shared types


@dataclass(frozen=True)
class ResourceSpec:
    """kube-scheduler's ResourceSpec: a resource a score counts, with its weight (v1 default 1)."""

    name: str
    weight: int = 1


DEFAULT_RESOURCES = (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))


def resource_specs(value: Any, path: str) -> tuple[ResourceSpec, ...]:
    """``[{name, weight}]`` with kube-scheduler's v1 defaults: none given is cpu and memory, and a
    weight left out or 0 is 1. Weight ranges differ per plugin and are checked there."""
    if value is None:
        return DEFAULT_RESOURCES
    out: list[ResourceSpec] = []
    for i, item in enumerate(listing(value, path)):
        here = f"{path}[{i}]"
        spec = mapping(item, here)
        check_fields(spec, ("name", "weight"), here)
        name = spec.get("name")
        if not isinstance(name, str) or not name:
            raise ArgsError(f"{join(here, 'name')}: Required value")
        weight = integer(spec.get("weight", 0), join(here, "weight"), int32=False)
        out.append(ResourceSpec(name, weight or 1))
    return tuple(out) or DEFAULT_RESOURCES
