"""The suite's example budget (tests/budget.py): every property test that sets its own count takes it through
``examples(n)``, so the Hypothesis profile (tests/conftest.py: "dev" a fifth, "ci" the full count) scales every
count, not only the counts of the tests that happened to ask for it."""

from __future__ import annotations

import ast
from pathlib import Path

from hypothesis import settings

from budget import examples

TESTS = Path(__file__).resolve().parent
FLOOR = 10  # examples(n) == n for every n up to here, in every profile: a literal count that small needs no scaling


def _counts_of(value: ast.expr, assigned: dict[str, ast.expr]) -> list[ast.expr]:
    """The expressions a ``max_examples=`` value can take: both branches of a conditional, a module-level name's
    assigned value."""
    if isinstance(value, ast.IfExp):
        return _counts_of(value.body, assigned) + _counts_of(value.orelse, assigned)
    if isinstance(value, ast.Name) and value.id in assigned:
        return _counts_of(assigned[value.id], assigned)
    return [value]


def _scaled(count: ast.expr) -> bool:
    if isinstance(count, ast.Call) and isinstance(count.func, ast.Name) and count.func.id == "examples":
        return True
    return isinstance(count, ast.Constant) and isinstance(count.value, int) and count.value <= FLOOR


def test_every_set_example_count_goes_through_examples():
    unscaled = []
    for path in sorted(TESTS.glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        assigned = {
            target.id: node.value
            for node in tree.body
            if isinstance(node, ast.Assign)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        for node in ast.walk(tree):
            for keyword in getattr(node, "keywords", []) if isinstance(node, ast.Call) else []:
                if keyword.arg == "max_examples":
                    unscaled += [
                        f"{path.name}:{count.lineno}: max_examples={ast.unparse(count)}"
                        for count in _counts_of(keyword.value, assigned)
                        if not _scaled(count)
                    ]
    assert unscaled == []


def test_examples_scales_down_to_the_floor_and_never_up():
    cap = settings().max_examples
    for full in (1, FLOOR, 11, 40, 200, 300):
        n = examples(full)
        assert n <= full and (n == full if full <= FLOOR else n >= FLOOR)
        assert n == min(full, max(FLOOR, full * cap // 100))
