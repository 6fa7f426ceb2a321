"""The options and arguments several commands share, and the checks typer runs on their values while it parses
them (a bad value is a usage error, exit 2)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Optional

import typer
import typer.core

from lantern.cli.common import fail, iso_time

try:  # typer 0.2x carries its own copy of click
    from typer._click.exceptions import NoSuchOption
except ImportError:  # earlier typer: click itself
    from click.exceptions import NoSuchOption
from lantern.text.names import plural


def _flags_without_metavar() -> None:
    """A flag takes no value, so its help shows none: typer (0.2x) prints a value type after every option in its
    rich help, ``<bool>`` after flags too (``--version <bool>``, ``--json <bool>``, ``--help <bool>``); for flags
    that type is dropped. Typers that print no type for flags have no ``display_type_rich``: nothing to change."""
    option = getattr(getattr(typer, "core", None), "TyperOption", None)
    display_type = getattr(option, "display_type_rich", None)
    if display_type is None or getattr(display_type, "lantern_flags", False):
        return

    def display_type_rich(self, ctx):
        return (
            None if getattr(self, "is_flag", False) and not getattr(self, "count", False) else display_type(self, ctx)
        )

    display_type_rich.lantern_flags = True
    option.display_type_rich = display_type_rich


_flags_without_metavar()


DISTRIBUTION = (
    "lantern-memory"  # the installed distribution whose version ``lantern --version`` prints (pyproject.toml)
)


def version_option(value: bool) -> None:
    """``lantern --version``: print ``lantern VERSION`` (the installed distribution's metadata) and exit 0, before
    any command or database is looked at."""
    if not value:
        return
    from importlib.metadata import PackageNotFoundError, version

    try:
        typer.echo(f"lantern {version(DISTRIBUTION)}")
    except PackageNotFoundError:
        fail(f"the distribution {DISTRIBUTION} is not installed (running from a source tree?): pip install -e .")
    raise typer.Exit(0)


def embedder_name(value: Optional[str]) -> Optional[str]:
    """An ``--embedder`` value unchanged when it names an embedder (``lantern.embed.embedder_class``: a name or an
    id); an unknown one is a usage error (exit 2), as a bad ``--format`` is, with the message of the Python API."""
    if value is None:
        return None
    from lantern.embed import embedder_class

    try:
        embedder_class(value)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    return value


def rewound_mode(value: Optional[str]) -> Optional[str]:
    """``--rewound`` is skip or mark; anything else is a usage error (exit 2)."""
    if value is not None and value not in ("skip", "mark"):
        raise typer.BadParameter(f"expected skip or mark, got {value!r}")
    return value


def db_location(value: Optional[str]) -> Any:
    """A database option's value as the location it names: a ``postgresql://`` URL kept as the string it is (a
    Path would fold its ``//`` and make it a relative file name), anything else a Path; None stays None. Every
    option naming a database takes a string and goes through here."""
    from lantern.config import is_server_url, location_error

    if (why := location_error(value)) is not None:
        raise typer.BadParameter(why)
    return None if value is None else value if is_server_url(value) else Path(value)


def sqlite_only(value: Optional[str]) -> Optional[str]:
    """An option that names a SQLite file only (``demo --demo-db``): a server URL is a usage error (exit 2), never
    taken as a relative file name (with its password in it)."""
    from lantern.config import is_server_url, redact_url

    if is_server_url(value):
        raise typer.BadParameter(f"takes a SQLite file path, not a server URL ({redact_url(value)})")
    return value


def secret(ctx: typer.Context, name: str, value: Optional[str], file: Optional[Path]) -> Optional[str]:
    """A secret option's value (``--token``, ``--upstream-key``): given, or read from its ``--...-file`` (the
    file's text without its final line break; any other process's ``ps`` shows a command line, not a file). Both
    given, or an unreadable or empty file, is a usage error. Given on the command line itself (not from its
    environment variable), a warning says that ``ps`` shows it."""
    option = "--" + name.replace("_", "-")
    if file is not None:
        if value is not None:
            raise typer.BadParameter(f"give {option} or {option}-file, not both", param_hint=f"'{option}-file'")
        try:
            value = file.read_text(encoding="utf-8").rstrip("\r\n")
        except (OSError, UnicodeDecodeError) as e:
            raise typer.BadParameter(f"cannot read {file}: {type(e).__name__}", param_hint=f"'{option}-file'") from None
        if not value:
            raise typer.BadParameter(f"{file} is empty", param_hint=f"'{option}-file'")
        return value
    if value is not None and on_command_line(ctx, name):
        warn_visible(option, f"use {option}-file or its environment variable")
    return value


def on_command_line(ctx: typer.Context, name: str) -> bool:
    """Whether option ``name`` was given on the command line (not by its environment variable nor its default)."""
    return getattr(ctx.get_parameter_source(name), "name", None) == "COMMANDLINE"


def url_password(value: str) -> bool:
    """Whether the URL ``value`` carries a password: a ``postgresql://`` URL's (userinfo or a secret parameter,
    ``config.has_password``) or an http(s) URL's user info (sent as basic auth, llm.py ``endpoint``)."""
    from urllib.parse import urlsplit

    from lantern.config import has_password, is_server_url

    if is_server_url(value):
        return has_password(value)
    try:
        parts = urlsplit(value)
        return parts.scheme.lower() in ("http", "https") and bool(parts.password)
    except ValueError:  # not a URL (a bad port): nothing to warn about, the option's own check says what is wrong
        return False


def warn_password(ctx: typer.Context, param: Any, value: Any) -> Any:
    """Callback of every option and argument that takes a URL (``--db``, ``copy``'s SRC and DST, ``--upstream``,
    ``--llm-base-url``): given on the command line (not by its environment variable) with a password in it, one
    warning that ``ps`` shows it, naming the alternatives: the option's environment variable, and libpq's
    ``$PGPASSWORD`` or ``~/.pgpass`` for a ``postgresql://`` URL. Returns ``value`` unchanged."""
    if not (isinstance(value, str) and on_command_line(ctx, param.name) and url_password(value)):
        return value
    from lantern.config import is_server_url

    shown = param.opts[0] if param.param_type_name == "option" else param.name.upper()
    instead = [f"${param.envvar}"] if isinstance(param.envvar, str) else []
    if is_server_url(value):
        instead += ["$PGPASSWORD", "~/.pgpass"]
    words = ", ".join(instead[:-1]) + " or " + instead[-1] if len(instead) > 1 else "".join(instead)
    warn_visible(f"the password of a {shown} URL", f"use {words}")
    return value


def warn_visible(what: str, instead: str) -> None:
    typer.secho(
        f"warning: {what} on the command line is visible to other users in ps; {instead} (docs/cli.md#secrets)",
        err=True,
        fg=typer.colors.YELLOW,
    )


def utf8(value):
    """A name option's value (session, user, agent, project, fact key) unchanged when it is text; a usage error
    when the shell passed bytes that are not UTF-8 (Python decodes them to lone surrogates, which SQLite cannot
    store nor match)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raw = (
                value.encode("utf-8", "surrogateescape")
                if all("\udc80" <= c <= "\udcff" for c in value if "\ud800" <= c <= "\udfff")
                else value.encode("utf-8", "backslashreplace")
            )
            raise typer.BadParameter(f"not UTF-8 text: {raw!r}; names are stored as UTF-8") from None
    return value


# the scope options of every memory command (lantern/scope.py)
def user_option(
    help: str = 'User id: only this user\'s entries (default $LANTERN_USER, else the default user "").',
) -> object:
    return typer.Option(None, "--user", "-u", envvar="LANTERN_USER", help=help, callback=utf8)


def agent_option() -> object:
    return typer.Option(
        None, "--agent", help="Agent id: a filter on reads (default any), a label on writes.", callback=utf8
    )


def llm_url_option() -> object:
    return typer.Option(
        None,
        "--llm-base-url",
        envvar="LANTERN_LLM_BASE_URL",
        metavar="URL",
        callback=warn_password,
        help="OpenAI-compatible API root (.../v1) of the LLM half; receives conversation text. Default "
        "$LANTERN_LLM_BASE_URL.",
    )


def llm_model_option() -> object:
    return typer.Option(
        None, "--llm-model", envvar="LANTERN_LLM_MODEL", metavar="NAME", help="Model name (default $LANTERN_LLM_MODEL)."
    )


def live_option() -> object:
    return typer.Option(
        None,
        "--live",
        metavar="FILE",
        help="A transcript of what is still in the live context (any ingest format): its turns are never recovered.",
    )


def live_messages(path: Optional[Path]) -> list | None:
    """The messages of the ``--live`` transcript (archive/parse: any format ``ingest`` reads; a pipe, ``/dev/stdin``
    or a FIFO is read to its end, as ``cat`` reads it: a FIFO waits for its writer), or None. Raises LanternError
    naming --live (one red line, exit 1) for a file that cannot be read or is not a transcript, and for one that
    holds no message (``[]``, ``{"messages": []}``, only empty messages: as ``ingest`` refuses a transcript with no
    turn): a live context always holds messages, so an empty one is a wrong file, not "nothing is live"."""
    if path is None:
        return None
    from lantern.archive.parse import parse
    from lantern.errors import LanternError

    try:
        result = parse(path)
    except LanternError as e:  # name the option: a --summary or --live file can be the one that is wrong
        raise LanternError(f"--live: {e}") from None
    if not result.messages:
        skipped = f" ({plural(result.skipped, 'item')} skipped)" if result.skipped else ""
        raise LanternError(
            f"no messages in the --live file {path}{skipped}: give the live context's messages (any format ingest "
            "reads), or leave --live out when nothing is live"
        )
    return result.messages


def rerank_option() -> object:
    return typer.Option(
        False, "--rerank", help="LANTERN-Rerank: one LLM call reorders the fused top candidates (needs --llm-base-url)."
    )


def llm_settings(base_url: Optional[str], model: Optional[str]):
    """The LLM endpoint the options and the environment name (lantern/llm.py ``settings``), or None when they name
    none; a usage error (exit 2) for a bad one."""
    from lantern.llm import settings

    try:
        return settings(None, base_url, model)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="'--llm-model'") from None


def rerank_settings(rerank: bool, base_url: Optional[str], model: Optional[str]):
    """The LLM settings of a command (lantern/llm.py), or None without --rerank. A usage error (exit 2) when
    --rerank has no endpoint or no model."""
    if not rerank:
        return None
    chosen = llm_settings(base_url, model)
    if chosen is None:
        raise typer.BadParameter(
            "--rerank needs an LLM endpoint: give --llm-base-url URL and --llm-model NAME", param_hint="'--rerank'"
        )
    return chosen


def project_option() -> object:
    return typer.Option(
        None, "--project", help="Project: a filter on reads (default any), a label on writes.", callback=utf8
    )


def iso_option(value: Optional[str]) -> Optional[str]:
    """``--as-of`` checked when parsed: a value that is no ISO 8601 time is a usage error (exit 2, as the README
    says of out-of-range values), not a runtime error (exit 1). Returns the value as given."""
    try:
        iso_time(value, "--as-of")
    except ValueError as e:
        raise typer.BadParameter(str(e).replace("--as-of must be", "must be")) from None
    return value


def uninstall_option() -> Any:
    return typer.Option(False, "--uninstall", help="Remove Lantern's hooks only.")


def pinned_db_option() -> Any:
    """``install``'s ``--db``: the database pinned in the hook command."""
    return typer.Option(
        None,
        "--db",
        help=(
            "Database the hooks write to, pinned in the hook command (default: the global --db, else $LANTERN_DB at "
            "install time; with neither, the hooks use $LANTERN_DB or ~/.lantern/lantern.db when they run)."
        ),
        callback=warn_password,
    )


def close_options(given: str, options: list[str]) -> list[str]:
    """The options of ``options`` (``--name`` forms) a mistyped ``given`` may have meant: the closest by name without
    the dashes (``difflib`` ratio >= 0.6, click's threshold; only those as close as the closest), and those the
    name starts with (two letters or more). Click compares the names with their dashes, and the two dashes every
    long option shares make unrelated names look close (``--bogus`` was answered with ``--user``)."""
    import difflib

    stem = given.lstrip("-").lower()
    if not stem:
        return []
    stems = {o.lstrip("-").lower(): o for o in options if o.startswith("--")}
    scored = [(difflib.SequenceMatcher(None, stem, s).ratio(), s) for s in stems]
    best = max((score for score, _ in scored), default=0.0)
    near = [s for score, s in scored if score >= 0.6 and score == best]
    prefixed = [s for s in stems if len(stem) >= 2 and s.startswith(stem)]
    return [stems[s] for s in dict.fromkeys(near + prefixed)]


class Group(typer.core.TyperGroup):
    """Lantern's command groups: an unknown option is answered with the options close to it (``close_options``),
    or none, in place of click's suggestions; plain values of the group's and its commands' parameters are
    converted without pydantic (cli/coercion.py)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        from lantern.cli.coercion import install

        install(self, ctx)
        with _suggesting():
            return super().parse_args(ctx, args)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        from lantern.cli.coercion import install

        name, command, rest = super().resolve_command(ctx, args)
        if command is not None:
            install(command, ctx)
        return name, command, rest

    def invoke(self, ctx: Any) -> Any:
        with _suggesting():
            return super().invoke(ctx)


@contextlib.contextmanager
def _suggesting():
    try:
        yield
    except NoSuchOption as e:
        command = e.ctx.command if e.ctx is not None else None
        if command is not None and e.option_name.startswith("--"):
            names = [o for p in command.params for o in (*p.opts, *p.secondary_opts)]
            e.possibilities = close_options(e.option_name, names)
        raise
