"""Plain option values converted without pydantic (typer 0.2x).

Typer 0.2x converts every parameter's value through a pydantic ``TypeAdapter`` that it builds when the command
runs, one per parameter, the unset ones included: a ``lantern recover`` imported pydantic and built 20 adapters
before it did anything (~60 ms of a quiet machine's cold start, ~190 ms at load 7; BENCHMARKS.md §27). The values
Lantern's commands take are mostly plain: a string, a decimal integer or number within its ``min``/``max``, a
flag, a path. ``install(command)`` gives each parameter of such a type a converter that answers those values as
typer's adapter would (the same Python value) and hands every other value (a bad number, an out-of-range one, an
undecodable string, a value from an environment variable's text for a flag) to typer's own adapter, built then, so
errors keep typer's words. Parameters of other types (choices, lists, dates, parsers) keep typer's conversion. A
typer without ``typer._coercion`` (before 0.2x, where click converts) is left alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lantern import lazy_re

try:
    from typer._coercion import RuntimeParam, build_runtime_param
    from typer._param_types import coerce_cli_path, routes_to_path
except ImportError:  # a typer that converts through click: nothing to install
    RuntimeParam = None

__all__ = ["install"]

# decimal forms only, no leading zero, sign or space variants: anything else goes to typer's adapter
_INT = lazy_re.compile(r"-?(?:0|[1-9][0-9]{0,17})")
_FLOAT = lazy_re.compile(r"-?(?:0|[1-9][0-9]{0,14})(?:\.[0-9]{1,15})?")


def _utf8(value: Any) -> bool:
    """A str that encodes to UTF-8 (no lone surrogate from an undecodable argument: typer's adapter decides it)."""
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _in_range(number: float, info: Any) -> bool:
    return (info.min is None or number >= info.min) and (info.max is None or number <= info.max)


def plain(annotation: Any, info: Any, value: Any) -> tuple[bool, Any]:
    """(True, the converted value) when ``value`` (a command line's text, or a default: an int, a float) is a plain
    value of ``annotation`` that typer's adapter would give unchanged in meaning; (False, None) when typer's adapter
    must decide."""
    if annotation is str:
        return (True, value) if _utf8(value) else (False, None)
    if annotation is bool:
        return (True, value) if isinstance(value, bool) else (False, None)
    if annotation is int and (type(value) is int or (_utf8(value) and _INT.fullmatch(value))):  # a default: int
        number = int(value)
        return (True, number) if _in_range(number, info) else (False, None)
    if annotation is float and (type(value) is float or (_utf8(value) and _FLOAT.fullmatch(value))):
        number = float(value)
        return (True, number) if math.isfinite(number) and _in_range(number, info) else (False, None)
    return False, None


if RuntimeParam is not None:

    @dataclass(frozen=True)
    class Plain(RuntimeParam):
        """Typer's conversion of one parameter, plain values answered without pydantic (module doc)."""

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            info, annotation = self.parameter_info, self.annotation
            if routes_to_path(annotation, info):  # typer's path adapter: its checks, on a Path made here
                path_type = info.path_type or (annotation if annotation is Path else None)
                if (isinstance(value, Path) or (_utf8(value) and value)) and path_type in (Path, None):
                    made = Path(value) if path_type is Path else value
                    return coerce_cli_path(made, info, path_type=path_type, param=param, ctx=ctx)
            else:
                done, converted = plain(annotation, info, value)
                if done:
                    return converted
            return _typers(param)._coerce_value(value, param=param, ctx=ctx)


def _typers(param: Any) -> Any:
    """Typer's own conversion of ``param``, built on first need (pydantic imported then)."""
    built = param.__dict__.get("_lantern_typer_runtime")
    if built is None:
        built = build_runtime_param(param.type_descriptor)
        param.__dict__["_lantern_typer_runtime"] = built
    return built


_PLAIN_TYPES = (str, int, float, bool, Path)


def install(command: Any, ctx: Any) -> None:
    """Give the parameters of ``command`` (a click command typer built; its help option too, made for ``ctx``)
    whose type is plain the ``Plain`` conversion; others, and parameters already converted, are left as they are.
    Does nothing on a typer without ``typer._coercion``."""
    if RuntimeParam is None:
        return
    get_params = getattr(command, "get_params", None)
    for param in get_params(ctx) if get_params is not None else ():
        descriptor = getattr(param, "type_descriptor", None)
        if descriptor is None or getattr(param, "_runtime_param", 0) is not None:
            continue
        if descriptor.file_annotation is not None or descriptor.annotation not in _PLAIN_TYPES:
            continue
        if descriptor.parameter_info.parser is not None or getattr(descriptor.parameter_info, "clamp", False):
            continue
        param._runtime_param = Plain(parameter_info=descriptor.parameter_info, annotation=descriptor.annotation)
