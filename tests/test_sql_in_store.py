"""docs/architecture.md §7: ``store/`` holds all SQL; nothing above it writes a statement or reaches for a store's
connection. Every module outside ``store/`` is parsed and its string constants (f-strings with their holes as
``X``; docstrings aside) are checked for a SQL statement, and its attribute reads for ``store.db`` / ``store.pool``."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "lantern"
# a statement: its keyword first, then what it acts on (a word alone, "Update the index", is prose)
STATEMENT = re.compile(
    r"^\s*(?:SELECT\b.*\bFROM\b|INSERT\b.*\bINTO\b|UPDATE\s+\w+\s+SET\b|DELETE\s+FROM\b|PRAGMA\s+\w+|"
    r"CREATE\s+(?:TABLE|INDEX)\b|DROP\s+(?:TABLE|INDEX)\b|ALTER\s+TABLE\b|BEGIN\b\s*(?:IMMEDIATE|EXCLUSIVE)?\s*$)",
    re.IGNORECASE | re.DOTALL,
)
# modules still allowed SQL above store/ (with their count of statements): none
PENDING: dict[str, int] = {}


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def statements(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, text) of each string constant of ``tree`` that holds a SQL statement."""
    docs = _docstrings(tree)
    inner = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "X" for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs | inner:
            text = node.value
        else:
            continue
        if STATEMENT.match(text):
            found.append((node.lineno, text[:60]))
    return found


def test_the_checker_finds_the_statements_it_looks_for():
    tree = ast.parse(
        'def f(db, w):\n    """SELECT id FROM entries: a docstring"""\n'
        '    db.execute(f"SELECT id FROM entries WHERE {w}")\n    db.execute("PRAGMA user_version")\n'
        '    db.execute("UPDATE entries SET c = 1")\n    return "Update the index", "select a session"\n'
    )
    assert [line for line, _ in statements(tree)] == [3, 4, 5]


ABOVE = sorted(p for p in SRC.rglob("*.py") if p.relative_to(SRC).parts[0] != "store")


@pytest.mark.parametrize("path", ABOVE, ids=[p.relative_to(SRC).as_posix() for p in ABOVE])
def test_no_sql_above_the_store(path):
    rel = path.relative_to(SRC).as_posix()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = statements(tree)
    assert len(found) == PENDING.get(rel, 0), f"{rel}: SQL outside store/ (make it a store method): {found}"
    reach = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr in ("db", "pool")
        and isinstance(node.value, (ast.Name, ast.Attribute))
        and (node.value.id if isinstance(node.value, ast.Name) else node.value.attr) == "store"
    ]
    assert not reach, f"{rel}: reads a store's connection at lines {reach} (ask a store method)"
