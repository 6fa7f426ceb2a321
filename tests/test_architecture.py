"""docs/architecture.md §7, the sizes and the two stores: no module of ``src/lantern`` over ``MAX_MODULE_LINES``
lines, no function or method over ``MAX_FUNCTION_LINES`` lines (from its ``def`` line to its last, decorators aside;
a nested function counts inside its parent too), and no method body of the SQLite store (``store/sqlite.py``,
``store/fulltext.py``) nearly identical to one of the PostgreSQL store (``store/postgres/``): what both do the same
way is written once, in ``store/base.py``. Each module is parsed (``ast``); a failure names the file, the function
and its line."""

from __future__ import annotations

import ast
import difflib
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "lantern"
MAX_MODULE_LINES = 1_200
MAX_FUNCTION_LINES = 150
# two method bodies (docstring aside, as ``ast.unparse`` writes them) of at least NEAR_MIN_LINES lines whose
# difflib ratio is at least NEAR_RATIO are one behaviour written twice; a shorter body (``close``: its connection's
# close after the erase, three lines) says less than the name of a shared helper would
NEAR_RATIO = 0.8
NEAR_MIN_LINES = 4
MODULES = sorted(SRC.rglob("*.py"))


def _rel(path: Path, root: Path = SRC) -> str:
    return path.relative_to(root).as_posix()


def functions(tree: ast.AST) -> list[tuple[str, int, int]]:
    """(qualified name, ``def`` line, length in lines) of every function and method of ``tree``."""
    out = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                out.append((name, child.lineno, child.end_lineno - child.lineno + 1))
                walk(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                walk(child, prefix + child.name + ".")
            else:
                walk(child, prefix)

    walk(tree, "")
    return out


def bodies(paths: list[Path], root: Path = SRC) -> list[tuple[str, str]]:
    """(``file:function:line``, body) of every function of ``paths`` (files under ``root``) with a body of
    ``NEAR_MIN_LINES`` lines or more."""
    out = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            body = node.body
            if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                body = body[1:]  # the docstring
            text = "\n".join(ast.unparse(statement) for statement in body)
            if text.count("\n") + 1 >= NEAR_MIN_LINES:
                out.append((f"{_rel(path, root)}:{node.name}:{node.lineno}", text))
    return out


def near_copies(left: list[Path], right: list[Path], root: Path = SRC) -> list[tuple[float, str, str]]:
    """The pairs of method bodies, one of ``left`` and one of ``right``, whatever their names, that are near
    copies (difflib ratio >= ``NEAR_RATIO``), most alike first."""
    found = []
    matcher, lefts = difflib.SequenceMatcher(autojunk=False), bodies(left, root)
    for b, text_b in bodies(right, root):
        matcher.set_seq2(text_b)  # difflib caches what it learns of the second sequence
        for a, text_a in lefts:
            matcher.set_seq1(text_a)
            if matcher.real_quick_ratio() >= NEAR_RATIO and matcher.quick_ratio() >= NEAR_RATIO:
                if (ratio := matcher.ratio()) >= NEAR_RATIO:
                    found.append((round(ratio, 2), a, b))
    return sorted(found, reverse=True)


def test_the_checkers_measure_what_they_say(tmp_path):
    tree = ast.parse(
        "class A:\n    @property\n    def f(self):\n        def g():\n            return 1\n\n        return g\n"
        "def h(): pass\n"
    )
    assert functions(tree) == [("A.f", 3, 5), ("A.f.g", 4, 2), ("h", 8, 1)]
    body = "    x = db.execute('SELECT 1')\n    y = x.fetchone()\n    z = y[0]\n    return z\n"
    (tmp_path / "a.py").write_text(f'def one(db):\n    """Doc."""\n{body}')
    (tmp_path / "b.py").write_text(f"def two(db):\n{body.replace('SELECT 1', 'SELECT 2')}")
    (tmp_path / "c.py").write_text("def three(db):\n    db.close()\n    return db\n")
    copies = near_copies([tmp_path / "a.py"], [tmp_path / "b.py", tmp_path / "c.py"], tmp_path)
    assert [(a, b) for _, a, b in copies] == [("a.py:one:1", "b.py:two:1")]


@pytest.mark.parametrize("path", MODULES, ids=[_rel(p) for p in MODULES])
def test_module_and_function_sizes(path):
    text = path.read_text(encoding="utf-8")
    lines = len(text.splitlines())
    assert lines <= MAX_MODULE_LINES, (
        f"{_rel(path)}: {lines} lines, over {MAX_MODULE_LINES:,} (split it along a seam: docs/architecture.md §7)"
    )
    long = [
        f"{name} (line {line}: {n} lines)" for name, line, n in functions(ast.parse(text)) if n > MAX_FUNCTION_LINES
    ]
    assert not long, f"{_rel(path)}: functions over {MAX_FUNCTION_LINES} lines: {', '.join(long)}"


def test_no_method_body_written_in_both_stores():
    sqlite = [SRC / "store" / "sqlite.py", SRC / "store" / "fulltext.py"]
    postgres = sorted((SRC / "store" / "postgres").glob("*.py"))
    copies = near_copies(sqlite, postgres)
    assert not copies, "near-identical bodies in both stores (write them once in store/base.py): " + "; ".join(
        f"{a} ~ {b} ({ratio})" for ratio, a, b in copies
    )
