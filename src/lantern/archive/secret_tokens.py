"""Provider tokens: credentials with a fixed format, found by a literal that every token of the format holds (its
prefix, or a fixed piece inside it), in time linear in the text (ours; used by archive/redact.py).

``TOKENS`` is the table of formats (archive/token_formats/, one module per family of providers; the row and its
constructors in token_formats/rule.py), one row (``TokenRule``) per format, each citing its ``source``: a rule of
gitleaks' default configuration (config/gitleaks.toml of github.com/gitleaks/gitleaks) or of its successor
betterleaks (config/betterleaks.toml), a plugin of Yelp's detect-secrets 1.5.0, or the provider's documentation of
the format (its prefix and length); the patterns are written there for this scanner. Each row also carries
``samples``, generators of realistic tokens of the format written from that documentation, and ``lookalikes``,
generators of texts that resemble the format and hold no secret (the prefix as a word, a shorter or longer run, a
public key or an identifier of the same provider: Twilio's account SIDs, Supabase's publishable keys). ``sample``
(token_formats/samples.py) expands one (the spec language is in its docstring); tests/test_secret_coverage.py
generates both for every row and checks that each sample is redacted on every entry path and each look-alike stays
as written. Credentials without a fixed format are found by context in redact.py and secret_context.py (whose
``CONTEXTS`` table is the same for them: ``KEY=value``, ``password is …``, URLs, headers, flags, config files).

    find_tokens(text, low) -> [(kind, start, end)]     # ``low`` = text lower-cased, same length

**Rules.** A row: (kind, triggers, pattern, options). A long token behind a distinctive prefix (``ATATT3``,
``ops_eyJ``, ``hvb.``) is taken from 40 characters on, shorter than its documented length: a token cut short (a
preview, a truncated log line) still holds most of the secret. A trigger is a literal; the pattern is matched at the
trigger (prefix rules) or ``back`` characters before it (a fixed piece inside the token: ``-us`` of a Mailchimp
key, ``Q~`` of an Azure AD secret), every quantifier bounded. A match is then widened to the right over the
token's characters (``chars``) so a token longer than its documented length is not left half in clear, unless
the rule is ``exact`` (a longer run is something else: an upper-case identifier is no AWS key id). A token never
starts inside a word (after an ASCII letter or digit). Case-insensitive triggers (``icase``) are looked for in
``low``. A rule without a literal has a ``gate``: a bounded regex that starts with a literal.

**Linear time.** Each trigger is found with ``str.find``; per rule, a candidate inside the run of token
characters that the rule already examined is skipped (a later start in the same run is a suffix of a token
already judged: a whole prefix-repeating run such as ``sk-sk-sk-…`` is examined once), and every pattern is
bounded, so each character is read a bounded number of times per rule. ``benchmarks/bench_worst_case.py``
measures it.
"""

from __future__ import annotations

import re
from functools import cache

from lantern import lazy_re
from lantern.archive.token_formats import TOKENS
from lantern.archive.token_formats.rule import TokenRule, jwt_ok
from lantern.archive.token_formats.samples import sample

__all__ = ["TOKENS", "TokenRule", "find_tokens", "jwt_ok", "sample", "trie_regex"]

_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")


def trie_regex(words: list[str]) -> re.Pattern[str]:
    """One regex matching any of ``words``, the longest at a position: their trie, written as nested groups
    (``s(?:k(?:-(?:ant-)?|_live_))``), so the engine reads a character once per level, not once per word."""
    root: dict = {}
    for w in words:
        node = root
        for c in w:
            node = node.setdefault(c, {})
        node[""] = {}

    def write(node: dict) -> str:
        alts = [re.escape(c) + write(child) for c, child in sorted(node.items()) if c]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        return f"(?:{body})?" if "" in node else body

    return lazy_re.compile(write(root) if words else "(?!)")


@cache
def _scanners() -> list[tuple[bool, re.Pattern[str], dict[str, list[tuple[int, int]]]]]:
    """Per case (exact, folded): the trigger regex and, for each literal it can match, the rules to judge there
    with their own trigger's length (every trigger that is a prefix of the literal: ``sk-`` under ``sk-ant-``).
    Built at the first scan, once (a process that redacts nothing never builds the tries)."""
    out = []
    for folded in (False, True):
        triggers: dict[str, list[int]] = {}
        for i, rule in enumerate(TOKENS):
            if rule.icase == folded and rule.gate is None:
                for t in rule.triggers:
                    triggers.setdefault(t.lower() if folded else t, []).append(i)
        dispatch = {
            lit: sorted((i, len(t)) for t, rules in triggers.items() if lit.startswith(t) for i in rules)
            for lit in triggers
        }
        out.append((folded, trie_regex(sorted(triggers)), dispatch))
    return out


_GATED = [i for i, rule in enumerate(TOKENS) if rule.gate is not None]


def _start(text: str, rule: TokenRule, at: int) -> int:
    """Where a token of ``rule`` found by its trigger at ``at`` starts (-1: too little before it)."""
    if rule.back is None:
        return at
    chars, lo, hi = rule.back
    members = _members(chars)
    i, stop = at, max(0, at - hi)
    while i > stop and text[i - 1] in members:
        i -= 1
    return i if at - i >= lo else -1


@cache
def _members(chars: str) -> frozenset[str]:
    """The characters of a character-class body (ASCII only: every token character is)."""
    one = re.compile(f"[{chars}]")
    return frozenset(c for c in map(chr, range(128)) if one.match(c))


def find_tokens(text: str, low: str) -> list[tuple[str, int, int]]:
    """The provider tokens of ``text`` as (kind, start, end), in no particular order; at one start only the first
    rule of ``TOKENS`` that accepts it. ``low``: ``text`` lower-cased with the same length."""
    examined = [-1] * len(TOKENS)  # per rule: the end of the run of token characters already judged
    best: dict[int, tuple[int, str, int]] = {}  # start -> (rule index, kind, end)
    for folded, scan, dispatch in _scanners():
        source = low if folded else text
        m = scan.search(source)
        while m is not None:  # overlapping: a trigger may start inside another ("…sl.atlasv1.…")
            at, rules = m.start(), dispatch[m.group()]
            for i, n in rules:
                _judge(text, TOKENS[i], i, at, n, examined, best)
            # on, past what every rule of this trigger has judged (a run of "AAAA…" is not read once per A)
            m = scan.search(source, max(at + 1, min(examined[i] for i, _ in rules)))
    for i in _GATED:
        for m in TOKENS[i].gate.finditer(text):
            _judge(text, TOKENS[i], i, m.start(), 0, examined, best)
    return [(kind, s, e) for s, (_, kind, e) in best.items()]


def _judge(text: str, rule: TokenRule, i: int, at: int, n: int, examined: list[int], best: dict) -> None:
    if at < examined[i]:
        return  # inside a run this rule already judged (see the module doc)
    s = _start(text, rule, at)
    if s < 0 or (s > 0 and text[s - 1] in _ALNUM):
        if rule.back is not None:  # the scan back cost up to ``back``'s max: not again inside this run
            examined[i] = max(rule.run.match(text, at).end(), at + 1)
        return
    m = rule.pattern.match(text, s)
    run_end = rule.run.match(text, s).end()
    examined[i] = max(run_end, at + 1)
    if m is None:
        return
    e = m.end()
    if rule.exact:
        if e < len(text) and rule.run.match(text, e).end() > e:
            return  # the run goes on: not this format
    else:
        e = max(e, run_end)
    if rule.validate is not None and not rule.validate(text[s:e]):
        return
    if rule.keep_prefix:
        s += n
    if s not in best or best[s][0] > i:
        best[s] = (i, rule.kind, e)
