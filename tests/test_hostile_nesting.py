"""Text nested deeper than Python's JSON parser can walk, in every place a turn carries it (issue 38, item 5: every
parse of text Lantern did not write is bounded). A tool call's arguments are an LLM's answer; a JWT-shaped token
in a message is foreign text the redaction decodes; a tool result, a message, a speaker name may hold anything.
Archived through the API, then every read that parses them (recover, recover_compaction, search, export) answers
without a RecursionError. Before: a tool call's arguments nested 45,000 deep made ``recover_compaction`` raise
(the hooks' and the proxy's block lost), and a JWT-shaped token whose payload nested 30,000 deep made ``archive``
raise (the turn, and the hook's whole batch, not archived)."""

from __future__ import annotations

import base64
import io

from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples
from lantern import Lantern
from lantern.model import Message, ToolCall, ToolResult


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _nested(depth: int, kind: str) -> str:
    opener, closer = ("[", "]") if kind == "array" else ('{"a":', "}")
    return opener * depth + "1" + closer * depth


@settings(max_examples=examples(8), deadline=None)
@given(
    depth=st.sampled_from([70, 2_000, 30_000, 45_000]),
    kind=st.sampled_from(["array", "object"]),
    place=st.sampled_from(["arguments", "jwt", "result", "text"]),
)
def test_deeply_nested_text_anywhere_in_a_turn_is_archived_and_read_back(tmp_path_factory, depth, kind, place):
    nested = _nested(depth, kind)
    arguments = '{"command": "echo ok"}'
    text, result = "Run the kestrel check on port 7510.", "ok: port 7510"
    if place == "arguments":
        arguments = '{"command": ' + nested + "}"
    elif place == "jwt":
        head, payload = _b64('{"alg":"HS256"}'), _b64('{"a":' + nested + "}")
        token = f"{head}.{payload}.c2lnbmF0dXJlMDEyMzQ1Njc4OQ"
        text += f" Authorization uses {token}"
    elif place == "result":
        result = nested
    else:
        text += " " + nested
    db = tmp_path_factory.mktemp("nest") / "n.db"
    with Lantern(db) as lt:
        r = lt.archive(
            [
                Message("user", text),
                Message("assistant", "", tool_calls=[ToolCall("bash", arguments, "c1")]),
                Message("tool", tool_results=[ToolResult(result, "c1")]),
                Message("assistant", "Done: the kestrel service answers on port 7510."),
            ],
            session="s",
        )
        assert r.added == 1
        assert lt.recover_compaction("The user checked a service.", session="s", budget=2_000).text is not None
        assert lt.recover("which port does kestrel use?", budget=2_000) is not None
        assert lt.search("kestrel port") is not None
        out = io.StringIO()
        lt.export(out)
        assert out.getvalue()


@given(depth=st.sampled_from([3, 100, 5_000, 60_000]))
def test_an_inspector_target_id_nested_deep_is_refused_in_words(depth):
    """A posted target id (``views.scope_of``) that decodes to nested JSON: the inspector's ValueError ("reload the
    page"), not a RecursionError (a 500)."""
    import pytest

    views = pytest.importorskip("lantern.integrations.ui.views")
    with pytest.raises(ValueError, match="reload the page"):
        views.scope_of(_b64("[" * depth + "]" * depth))
    assert views.scope_of(views.scope_id("s\r\ny", "u")) == ("s\r\ny", "u")
