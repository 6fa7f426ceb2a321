"""``lantern --help`` and each command's ``--help`` as a user reads them, a wide terminal ($COLUMNS); in-process
(tests/clirun.py; tests/test_cli.py runs ``lantern --help`` as a real process too)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples
from clirun import lantern


def help_text(*command: str, columns: int = 400) -> str:
    proc = lantern(*command, "--help", columns=columns)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode()


@pytest.mark.parametrize(
    "command, placeholder",
    [
        ("recover", "QUERY"),
        ("search", "QUERY"),
        ("ingest", "FILE|DIR"),
        ("export", "FILE|-"),
        ("import", "FILE|-"),
        ("facts", "KEY"),
        ("feedback", "ID"),
        ("eval", "DATASET"),
    ],
)
def test_usage_line_names_the_argument_as_the_help_text_does(command, placeholder):
    """Newcomer finding: the usage line said ``recover [OPTIONS] {query}`` where the help text and the README say
    QUERY; every positional argument is written in capitals, in the usage line and in the Arguments panel."""
    text = help_text(command)
    usage = next(line for line in text.splitlines() if "Usage:" in line)
    assert f"{command} [OPTIONS] " in usage and placeholder in usage, usage
    assert not any(c.islower() for c in usage.split("[OPTIONS]", 1)[1]), usage
    assert f" {placeholder} " in text.split("Arguments", 1)[1], text


def test_help_text_has_no_stray_line_break_and_keeps_its_brackets():
    """Newcomer finding: the line breaks of a docstring's source stayed in the help (``lantern --help`` listed
    ingest as "... format detected per" / "file; files that ..."; the second paragraph of ``import --help`` and
    ``forget --help`` broke mid-sentence), and rich markup ate ``[eval]`` from ``pip install
    'lantern-memory[eval]'``. On a terminal wide enough, each paragraph of a command's docstring is one line of its
    help, as written, and its first paragraph one line of the command list."""
    from lantern import cli

    listing = help_text()
    for group, prefix in ((cli.app, ()), (cli.hook_app, ("hook",)), (cli.install_app, ("install",))):
        for info in group.registered_commands:
            name = info.name or info.callback.__name__
            paragraphs = [" ".join(p.split()) for p in inspect.cleandoc(info.callback.__doc__).split("\n\n")]
            text = help_text(*prefix, name)
            for paragraph in paragraphs:
                assert paragraph in text, (name, paragraph, text)
            if not prefix:
                assert paragraphs[0] in listing, (name, paragraphs[0], listing)
    assert "`eval` extra (scipy, matplotlib)" in help_text("eval")  # backquotes and parentheses kept


def _commands():
    """(path, click command) of every command of ``lantern``, groups included."""
    import typer

    from lantern import cli

    out, todo = [], [((), typer.main.get_command(cli.app))]
    while todo:
        path, command = todo.pop(0)
        out.append((path, command))
        todo += [((*path, name), sub) for name, sub in sorted(getattr(command, "commands", {}).items())]
    return out


def test_flags_show_no_metavar_and_every_option_says_what_it_does():
    """Newcomer findings: flags were listed with a value type, ``--version <bool>``, ``--json <bool>`` (they take no
    value); ``search --session``, ``search --json`` and ``stats --json`` had no description."""
    for path, command in _commands():
        text = help_text(*path)
        assert "<bool>" not in text, (path, text)
        options = [p for p in command.params if p.param_type_name == "option"]
        for p in options:
            assert (p.help or "").strip(), (path, p.opts)
            if not p.is_flag:
                continue
            row = next(line for line in text.splitlines() if p.opts[0] in line.replace(",", " ").split())
            assert "<" not in row.split(p.opts[0], 1)[1].split(p.help.split()[0], 1)[0], (path, row)
    top = help_text()
    assert " --db " in top and "<path|url>" in top and "<str>" in top  # options that take a value show their type
    assert "--version  " in top
    search = help_text("search")
    assert "Only this session (and its sub-sessions)." in search and "Print the results as JSON" in search
    assert "Print the statistics as one JSON object." in help_text("stats")


CLI_MD = Path(__file__).resolve().parents[1] / "docs" / "cli.md"


def _documentation(doc: str, path: tuple[str, ...]) -> str | None:
    """What docs/cli.md says about the command ``path``: its rows of the Commands table (``| `lantern PATH ...``),
    its bullets among the details (``- **`NAME`** ...``, up to the next bullet or paragraph), and every other section
    that names it (``## Scope options`` names the commands that take them); for the top level, ``## Global
    options``. None when the command has no row in the table."""
    sections = re.split(r"(?m)^## ", doc)
    if not path:
        return "\n".join(s for s in sections if s.startswith("Global options"))
    name = " ".join(path)
    rows = [line for line in doc.splitlines() if re.match(rf"\| `lantern {re.escape(name)}(?![\w-])", line)]
    if not rows:
        return None
    bullets = [
        head + body
        for head, body in re.findall(r"(?ms)^- \*\*(.*?)\*\*(.*?)(?=^- \*\*|^\S|\Z)", doc)
        if f"`{path[-1]}`" in head or f"`{name}`" in head
    ]
    named = rf"`(?:lantern )?{re.escape(name)}(?![\w-])"
    others = [s for s in sections if not s.startswith("Commands") and re.search(named, s)]
    return "\n".join(rows + bullets + others)


def test_every_command_and_option_is_documented_in_cli_md():
    """Every command of ``lantern`` (groups and subcommands included) has a row in docs/cli.md's Commands table, and
    each of its options (a flag by either of its names, ``--plots`` / ``--no-plots``; an option with only a short name
    by that) is written where cli.md speaks of that command: its row, its bullet, or a section naming it. Read off
    the real command tree, so a new command or option fails here until it is documented."""
    doc = CLI_MD.read_text(encoding="utf-8")
    missing = []
    for path, command in _commands():
        text = _documentation(doc, path)
        if text is None:
            missing.append(f"lantern {' '.join(path)}: no row in the Commands table")
            continue
        for param in command.params:
            if param.param_type_name != "option" or param.hidden:
                continue
            names = [o for o in param.opts + param.secondary_opts if o.startswith("--")] or param.opts
            if not any(re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", text) for o in names):
                missing.append(f"lantern {' '.join(path)} {names[0]}".replace("  ", " "))
    assert not missing, "not documented in docs/cli.md:\n" + "\n".join(missing)


def test_the_documentation_check_sees_a_missing_option():
    """The check above reads what it should: an option written only under another command is not documented for
    this one, and a command left out of the table is reported."""
    doc = "## Commands\n\n| `lantern a [--x N]` | a |\n| `lantern b` | b |\n\n- **`b`**. Takes `--y`.\n"
    assert "--x" in _documentation(doc, ("a",)) and "--y" not in _documentation(doc, ("a",))
    assert "--y" in _documentation(doc, ("b",)) and "--x" not in _documentation(doc, ("b",))
    assert _documentation(doc, ("c",)) is None


def _leaf_commands() -> list[tuple[tuple[str, ...], list[str]]]:
    """(command path, its long options) of every command ``lantern`` runs."""
    import typer.main

    from lantern.cli import app

    out = []

    def walk(cmd, path):
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, (*path, name))
        else:
            out.append((path, [o for p in cmd.params for o in (*p.opts, *p.secondary_opts) if o.startswith("--")]))

    walk(typer.main.get_command(app), ())
    return out


_LEAVES = _leaf_commands()


@given(data=st.data())
@settings(max_examples=examples(80), deadline=None)
def test_an_unknown_option_is_answered_with_close_options_only(data):
    """``lantern CMD --word`` names only options close to ``word``: a word sharing no letter with any option of the
    command gets no suggestion (click's comparison with the dashes answered ``--bogus`` with ``--user``), and a
    one-letter slip in an option's name gets that option suggested."""
    path, options = data.draw(st.sampled_from(_LEAVES))
    letters = sorted(set("abcdefghijklmnopqrstuvwxyz") - set("".join(options).lower()))
    if letters and data.draw(st.booleans()):
        word = data.draw(st.text(alphabet=letters, min_size=1, max_size=7))
        expected = None
    else:
        long_names = [o for o in options if len(o) >= 6]  # --name with four letters or more
        if not long_names:
            return
        option = data.draw(st.sampled_from(long_names))
        i = data.draw(st.integers(3, len(option) - 1))
        word = option[:i] + option[i + 1 :]  # one letter dropped
        if word in options:
            return
        expected = option
    r = lantern(*path, f"--{word.lstrip('-')}")
    err = r.stderr.decode()
    assert r.returncode == 2 and "No such option" in err, err
    suggested = re.findall(r"--[a-z0-9-]+", err.split("Possible options:", 1)[1]) if "Possible options" in err else []
    if expected is None:
        assert suggested == [], (path, word, err)
    else:
        assert expected in suggested, (path, word, err)


def test_bogus_is_not_user():
    err = lantern("recover", "x", "--bogus").stderr.decode()
    assert "No such option: --bogus" in err and "Possible options" not in err, err


ENV_READ = re.compile(
    r"""(?:environ(?:\.get)?\(\s*|environ\[\s*|getenv\(\s*|envvar=|_ENV\s*=\s*)["'](LANTERN_[A-Z0-9_]+)["']"""
)


def lantern_env_vars(root: Path) -> set[str]:
    """Every ``LANTERN_*`` variable the source reads: ``os.environ[...]`` / ``.get`` / ``getenv``, typer's
    ``envvar=``, and the ``*_ENV`` constants that name one."""
    return {m.group(1) for path in root.rglob("*.py") for m in ENV_READ.finditer(path.read_text(encoding="utf-8"))}


def test_every_environment_variable_the_code_reads_is_in_configuration_md():
    """Newcomer finding: ten variables (the LLM endpoint's, the token files', $LANTERN_REWOUND) were read by the
    code and missing from docs/configuration.md's table, the one place a user looks them up."""
    root = Path(__file__).resolve().parents[1]
    read = lantern_env_vars(root / "src/lantern")
    assert {"LANTERN_DB", "LANTERN_LLM_TIMEOUT", "LANTERN_REWOUND", "LANTERN_UI_TOKEN_FILE"} <= read  # the scan works
    table = (root / "docs/configuration.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"`(LANTERN_[A-Z0-9_]+)`", table.split("## Environment variables", 1)[1]))
    assert read - documented == set()
