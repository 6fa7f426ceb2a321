"""The provider token table, one module per family of providers: ``TOKENS``, every row in the order the scanner
(archive/secret_tokens.py) judges them. Order matters where two rules find the same start: the first one names
the token (specific before generic)."""

from __future__ import annotations

from lantern.archive.token_formats import ai, cloud, code_hosting, communication, payments, services
from lantern.archive.token_formats.rule import TokenRule

__all__ = ["TOKENS"]

TOKENS: tuple[TokenRule, ...] = (
    *ai.TOKENS,
    *cloud.TOKENS,
    *code_hosting.TOKENS,
    *communication.TOKENS,
    *payments.TOKENS,
    *services.TOKENS,
)
