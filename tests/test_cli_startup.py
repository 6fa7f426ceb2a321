"""What a CLI process loads before its command runs (lantern/cli/__init__.py ``build``, cli/coercion.py): one command
module and one command's parameters, no pydantic for plain values, and the same values and errors as typer's own
conversion."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples
from lantern.cli import COMMANDS, build, coercion, command_named

pytestmark = pytest.mark.skipif(coercion.RuntimeParam is None, reason="a typer that converts through click")

PROBE = r"""
import sys
sys.argv = ["lantern", *sys.argv[1:]]
from lantern.cli import main
try:
    main()
except SystemExit:
    pass
mods = sorted(m for m in sys.modules if m == "pydantic" or m.startswith(("lantern.cli.", "typer._adapters")))
print(" ".join(mods), file=sys.stderr)
"""


def _loaded(*args: str, tmp_path: Path) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, env=None, cwd=tmp_path, timeout=120
    )
    return set(done.stderr.strip().splitlines()[-1].split())


def test_a_command_loads_its_module_alone_and_no_pydantic(tmp_path):
    """``lantern --db X recover Q`` imports the read commands' module (and what every command shares), not the
    other command modules, and converts its values, its defaults too, without pydantic."""
    loaded = _loaded("--db", str(tmp_path / "none.db"), "recover", "which port?", tmp_path=tmp_path)
    assert "lantern.cli.recover" in loaded
    assert not loaded & {"lantern.cli.store", "lantern.cli.archive", "lantern.cli.integrations", "lantern.cli.eval"}
    assert "pydantic" not in loaded and "typer._adapters" not in loaded
    loaded = _loaded("--db", str(tmp_path / "none.db"), "stats", "--json", tmp_path=tmp_path)
    assert "lantern.cli.store" in loaded
    assert not loaded & {"lantern.cli.recover", "lantern.cli.archive", "lantern.cli.integrations", "lantern.cli.eval"}
    assert "pydantic" not in loaded and "typer._adapters" not in loaded


def test_help_and_an_unknown_command_still_see_every_command(tmp_path):
    assert {"lantern.cli.recover", "lantern.cli.integrations"} <= _loaded("--help", tmp_path=tmp_path)
    assert command_named(["recoverr"]) is None  # the whole app answers, with its suggestion


@settings(max_examples=examples(60), deadline=None)
@given(
    argv=st.lists(
        st.sampled_from(["--db", "x.db", "--embedder", "minilm", "--db=y", "recover", "hook", "codex", "--help", "q"]),
        max_size=6,
    )
)
def test_the_command_named_is_the_first_word_after_the_global_options(argv):
    name = command_named(argv)
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        i += 1 if "=" in argv[i] or argv[i] not in ("--db", "--embedder", "--rewound") else 2
    expect = argv[i] if i < len(argv) and argv[i] in {g or c for g, c, _, _ in COMMANDS} else None
    assert name == expect


def test_a_one_command_app_holds_that_command_as_the_whole_app_does():
    whole = typer.main.get_command(build()[0])
    for group, command, _, _ in COMMANDS:
        one = typer.main.get_command(build(group or command)[0])
        got, want = one.commands[group or command], whole.commands[group or command]
        if group:
            got, want = got.commands[command], want.commands[command]
        assert [p.opts for p in got.params] == [p.opts for p in want.params]
        assert got.help == want.help


def _params():
    """Every plain parameter of every command: (command, parameter)."""
    whole = typer.main.get_command(build()[0])
    out = []
    for group, command, _, _ in COMMANDS:
        cmd = whole.commands[group or command]
        cmd = cmd.commands[command] if group else cmd
        for p in cmd.params:
            d = getattr(p, "type_descriptor", None)
            if d is not None and d.annotation in (str, int, float, Path) and d.parameter_info.parser is None:
                out.append((f"{group} {command}".strip(), p))
    return out


PARAMS = _params()
VALUES = st.one_of(
    st.from_regex(r"-?[0-9]{1,4}(\.[0-9]{1,3})?", fullmatch=True),
    st.sampled_from(["", "0", "-0", "007", "1e3", " 5", "5 ", "1_000", "nan", "inf", "-1", "x", "\udcff", "-", "~/x"]),
    st.text(max_size=8),
    st.integers(-(10**20), 10**20),  # defaults reach the conversion as Python values
    st.floats(allow_nan=True, allow_infinity=True),
    st.builds(Path, st.sampled_from(["a.txt", "/nonexistent/x", ".", "~"])),
    st.booleans(),
)


@settings(max_examples=examples(300), deadline=None)
@given(which=st.integers(0, len(PARAMS) - 1), value=VALUES)
def test_plain_conversion_gives_what_typers_adapter_gives(which, value, tmp_path_factory):
    """For every plain parameter of every command and any value, the converted value (or the error's words) is
    the one typer's pydantic adapter gives."""
    from typer._coercion import build_runtime_param
    from typer.core import TyperCommand

    name, param = PARAMS[which]
    ctx = typer.Context(TyperCommand(name))
    theirs = build_runtime_param(param.type_descriptor)
    ours = coercion.Plain(
        parameter_info=param.type_descriptor.parameter_info, annotation=param.type_descriptor.annotation
    )

    def outcome(runtime):
        try:
            return ("ok", runtime._coerce_value(value, param=param, ctx=ctx))
        except Exception as e:  # noqa: BLE001 - the error is the outcome compared
            return (type(e).__name__, str(getattr(e, "message", e)))

    assert outcome(ours) == outcome(theirs), (name, param.name, value)
