"""One-line messages for input that does not fit a tool's or an endpoint's schema, shared by the MCP server and the
REST API (ours): every field and its problem on one line, no pydantic URL, no newline, values quoted up to
``MAX_SHOWN_INPUT`` characters."""

from __future__ import annotations

from typing import Any

MAX_SHOWN_INPUT = 40  # characters of a rejected value quoted in a validation message (ours)


def _where(loc: tuple) -> str:
    """``("exclude", 0, "int")`` -> ``exclude[0]``: the argument, then list indexes; a union member's tag (a type
    name such as ``int`` or ``dict[str,any]``) is not part of the path."""
    if not loc:
        return "arguments"
    return str(loc[0]) + "".join(f"[{x}]" for x in loc[1:] if isinstance(x, int))


def _problem(error: dict) -> str:
    msg = " ".join(str(error.get("msg", "invalid")).split())
    if error.get("type") == "missing":
        return "required"
    msg = msg.replace("Input should be", "should be").replace("List should", "should")
    return msg[:1].lower() + msg[1:]


def _shown(value: Any) -> str:
    """A rejected value quoted in one line, up to MAX_SHOWN_INPUT characters. An integer longer than Python
    writes out (``sys.get_int_max_str_digits()``: repr raises ValueError) is described by its size instead."""
    try:
        text = repr(value)
    except ValueError:
        if isinstance(value, int):
            return f"an integer of about {int(value.bit_length() * 0.30103) + 1:,} digits"
        return type(value).__name__
    return " ".join(text.split())[:MAX_SHOWN_INPUT]


def validation_message(tool: str, errors: list[dict]) -> str:
    """One line for arguments that fail a tool's schema, from pydantic's ``ValidationError.errors()``: ``invalid
    arguments for TOOL: FIELD: PROBLEM (got VALUE); ...``. Errors of one field (the members of a union such as
    ``exclude``'s message-or-id) are joined with "or"; a value is quoted up to MAX_SHOWN_INPUT characters. Ours."""
    by_field: dict[str, tuple[list[str], Any]] = {}
    for e in errors:
        where = _where(tuple(e.get("loc", ())))
        problems, _ = by_field.setdefault(where, ([], e.get("input")))
        problem = _problem(e)
        if problems and problem.startswith("should be "):  # "should be a valid dictionary or a valid integer"
            problem = problem[len("should be ") :]
        if problem not in problems:
            problems.append(problem)
    parts = []
    for where, (problems, value) in by_field.items():
        shown = "" if problems == ["required"] else f" (got {_shown(value)})"
        parts.append(f"{where}: {' or '.join(problems)}{shown}")
    return f"invalid arguments for {tool}: " + "; ".join(parts)


def unknown_arguments_message(tool: str, unknown: list[str], known: list[str]) -> str:
    """One line for argument names a tool does not take: ``unknown arguments for TOOL: 'kk', 'sesion' (TOOL takes
    query, k, session)``; names quoted up to MAX_SHOWN_INPUT characters. Ours (the SDK ignores such names)."""
    names = ", ".join(" ".join(repr(n[:MAX_SHOWN_INPUT]).split()) for n in unknown)
    takes = ", ".join(known) if known else "no arguments"
    return f"unknown argument{'s' if len(unknown) > 1 else ''} for {tool}: {names} ({tool} takes {takes})"
