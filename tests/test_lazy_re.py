"""lantern/lazy_re.py: patterns compiled at their first use, once, the same as re.compile's; no Lantern module compiles
a pattern at import."""

from __future__ import annotations

import importlib
import pkgutil
import re
import subprocess
import sys
import threading

from hypothesis import given, settings
from hypothesis import strategies as st

import lantern
from budget import examples
from lantern import lazy_re

PATTERNS = [
    (r"(?P<word>[A-Za-z]+)-(\d+)", 0),
    (r"\bport\s*[:=]\s*(\d{2,5})", re.I),
    (r"[^\s\"'<>]+@[\w.-]+", 0),
    (r"(?m)^\s*#.*$", 0),
    (r"a|b|", 0),
]


@settings(max_examples=examples(200), deadline=None)
@given(which=st.sampled_from(PATTERNS), text=st.text(alphabet="aAbB-0123456789 port:=@x.#\n\t\"'", max_size=60))
def test_a_lazy_pattern_answers_as_the_compiled_one(which, text):
    eager, lazy = re.compile(*which), lazy_re.compile(*which)
    assert lazy.pattern == eager.pattern
    assert [m.span() for m in lazy.finditer(text)] == [m.span() for m in eager.finditer(text)]
    assert lazy.sub("<\\g<0>>", text) == eager.sub("<\\g<0>>", text)
    assert lazy.split(text) == eager.split(text)
    for at in range(0, len(text) + 1, 7):
        got, want = lazy.match(text, at), eager.match(text, at)
        assert (got and got.span()) == (want and want.span())
        got, want = lazy.search(text, at), eager.search(text, at)
        assert (got and got.groups()) == (want and want.groups())
    assert (lazy.flags, lazy.groups, dict(lazy.groupindex)) == (eager.flags, eager.groups, dict(eager.groupindex))


def test_first_uses_in_many_threads_compile_once():
    lazy = lazy_re.compile(r"(\w+)@(\w+)\.example")
    start, got = threading.Barrier(8), []

    def use():
        start.wait()
        got.append((lazy.compiled(), lazy.search("mail ann@host.example").group(2)))

    threads = [threading.Thread(target=use) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(p) for p, _ in got}) == 1 and {g for _, g in got} == {"host"}
    assert lazy.search.__self__ is lazy.compiled()  # after the first use, the compiled pattern's own method


def test_a_bad_pattern_raises_at_its_first_use():
    bad = lazy_re.compile("(unclosed")
    try:
        bad.search("x")
    except re.error:
        pass
    else:
        raise AssertionError("re.error expected")


def test_every_module_level_pattern_of_lantern_compiles():
    """A pattern compiled late would hide a syntax error until some input reaches it: every LazyPattern held at
    module level by a Lantern module (and each TokenRule's) compiles, to what re.compile gives."""
    seen = 0
    for info in pkgutil.walk_packages(lantern.__path__, "lantern."):
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional extra not installed (proxy, ui, mcp, postgres)
            continue
        for value in vars(module).values():
            items = value if isinstance(value, (tuple, list)) else (value,)
            for item in (x for i in items for x in (i if isinstance(i, tuple) else (i,))):  # (label, pattern) too
                for p in (item, getattr(item, "pattern", None), getattr(item, "gate", None)):
                    if isinstance(p, lazy_re.LazyPattern):
                        assert p.compiled().pattern == re.compile(p.pattern, p._flags).pattern
                        seen += 1
    assert seen > 300


def test_importing_the_hook_and_the_read_path_compiles_no_lantern_pattern():
    """A cold hook or CLI command pays no regex compile at import (the ~300 rule patterns compiled on first use):
    counted in a fresh process through re's compiler, by the module that called it."""
    code = r"""
import sys, re._compiler as rc
orig, ours = rc.compile, []
def counting(p, flags=0):
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.endswith(("re/__init__.py", "lazy_re.py")):
        f = f.f_back
    if f is not None and "/lantern/" in f.f_code.co_filename:
        ours.append(f"{f.f_code.co_filename}:{f.f_lineno}")
    return orig(p, flags)
rc.compile = counting
import lantern.api, lantern.integrations.claude_code, lantern.integrations.codex, lantern.compaction
import lantern.memory.triggers, lantern.cli
print(len(ours), ours[:5])
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("0 "), out
