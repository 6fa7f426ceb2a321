"""How many examples a property test takes: ``examples(n)``, ``n`` being its count in a full run (Hypothesis
profile "ci", HYPOTHESIS_PROFILE=ci), scaled by the profile loaded in tests/conftest.py ("dev", a developer's default:
a fifth, at least 10; "ci" under CI=true)."""

from __future__ import annotations

from hypothesis import settings


def examples(full: int) -> int:
    return min(full, max(10, full * settings().max_examples // 100))
