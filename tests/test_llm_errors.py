"""What an LLM endpoint's error answer becomes: ``LLMError`` with the endpoint's own message (``detail``), its
``code``, and ``context_too_long`` when the request was refused for its size. The shapes come from a local server
speaking the OpenAI API (tests/openai_fake.py); a real model's refusal is in test_llm_real.py."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lantern.llm import DETAIL_CHARS, LLMClient, LLMError, LLMSettings
from openai_fake import FakeLLM, answer, raw

MESSAGES = [{"role": "user", "content": "hi"}]


def _error(reply: dict) -> LLMError:
    with FakeLLM([reply]) as fake, LLMClient(fake.settings()) as client:
        with pytest.raises(LLMError) as info:
            client.chat(MESSAGES)
    return info.value


@pytest.mark.parametrize(
    ("body", "status", "too_long"),
    [
        # OpenAI and llama-cpp-python's server
        (
            {
                "error": {
                    "message": "This model's maximum context length is 4096 tokens.",
                    "code": "context_length_exceeded",
                }
            },
            400,
            True,
        ),
        # vLLM
        (
            {"error": {"message": "This model's maximum context length is 2048 tokens. However, you requested 3000"}},
            400,
            True,
        ),
        # Anthropic
        (
            {
                "type": "error",
                "error": {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens"},
            },
            400,
            True,
        ),
        # a proxy's size limit
        ({"detail": "Request Entity Too Large"}, 413, True),
        # other refusals are not about size
        ({"error": {"message": "model 'x' not found", "code": "model_not_found"}}, 404, False),
        ({"error": {"message": "Invalid value for temperature"}}, 400, False),
        ({"error": {"message": "context length exceeded"}}, 500, False),
        # a field's own limit says "too long" too (OpenAI's wording for a message name)
        (
            {
                "error": {
                    "message": "Invalid 'messages[1].name': string too long. Expected a string with maximum length 64",
                    "code": "string_above_max_length",
                }
            },
            400,
            False,
        ),
        ({"error": {"message": "Input is too long for requested model."}}, 400, True),  # Amazon Bedrock
    ],
)
def test_an_error_answer_names_the_endpoints_reason(body, status, too_long):
    e = _error(raw(json.dumps(body).encode(), status))
    assert e.kind == "http" and e.status == status
    assert e.detail and e.detail in str(e)
    assert e.context_too_long is too_long


def test_an_error_body_that_is_not_json_gives_its_first_line_and_a_bare_one_nothing():
    e = _error(raw(b"upstream overloaded\n<html>...</html>", 502))
    assert e.detail == "upstream overloaded" and str(e).endswith(": upstream overloaded")
    e = _error(raw(b"", 503))
    assert e.detail == "" and str(e).endswith("HTTP 503")


def test_the_api_key_echoed_by_an_endpoint_is_never_in_the_error(monkeypatch):
    monkeypatch.setenv("LANTERN_LLM_API_KEY", "sk-secret-0123456789")
    e = _error(raw(b'{"error": {"message": "Incorrect API key provided: sk-secret-0123456789"}}', 401))
    assert "sk-secret-0123456789" not in str(e) and "***" in e.detail


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    key=st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=12, max_size=60),
    before=st.integers(0, DETAIL_CHARS + 50),
    where=st.sampled_from(["message", "code", "text"]),
)
def test_an_echoed_key_leaves_no_part_of_itself_wherever_the_endpoint_puts_it(monkeypatch, key, before, where):
    """The key echoed anywhere in the message (also across the ``DETAIL_CHARS`` cut), in ``error.code``, or in a
    body that is not JSON: nothing of it (not even its first 8 characters) is in the error."""
    monkeypatch.setenv("LANTERN_LLM_API_KEY", key)
    echoed = "e" * before + " key " + key + " rejected"
    if where == "text":
        body = echoed.encode()
    else:
        error = {"message": echoed, "code": "x"} if where == "message" else {"message": "bad key", "code": key}
        body = json.dumps({"error": error}).encode()
    e = _error(raw(body, 401))
    assert key[:8] not in str(e) + e.detail + e.code


@pytest.mark.parametrize("status", [200, 500])
def test_a_body_nested_deeper_than_the_recursion_limit_is_an_llm_error(status):
    e = _error(raw(b'{"error": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", status))
    assert e.kind == ("malformed" if status == 200 else "http") and len(e.detail) <= DETAIL_CHARS


def test_credentials_in_the_base_url_are_not_in_the_error():
    with FakeLLM([raw(b'{"error": {"message": "nope"}}', 401)]) as fake:
        url = fake.base_url.replace("http://", "http://user:hunter2@") + "?api-key=hunter3"
        with LLMClient(LLMSettings(url, "m", 5.0)) as client, pytest.raises(LLMError) as info:
            client.chat(MESSAGES)
    assert info.value.status == 401 and "hunter" not in str(info.value) and "***@127.0.0.1" in str(info.value)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=400),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["error", "message", "code", "detail", "type"]) | st.text(max_size=8), inner, max_size=4
        )
    ),
    max_leaves=12,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=_JSON, status=st.sampled_from([400, 401, 404, 413, 422, 429, 500, 502, 503]))
def test_any_error_body_gives_an_llm_error_with_a_short_clean_detail(body, status):
    e = _error(raw(json.dumps(body).encode(), status))
    assert e.status == status and len(e.detail) <= DETAIL_CHARS
    assert not any(ch < " " for ch in e.detail)
    assert isinstance(e.context_too_long, bool)


def test_a_success_after_an_error_body_is_unaffected():
    with FakeLLM([answer("fine")]) as fake, LLMClient(fake.settings()) as client:
        assert client.chat(MESSAGES).text == "fine"


# ---------------------------------------------------------------- the memory agent fits its context to the window
CODE_TURNS = [
    {"role": "user", "content": "Show me the billing module and remember its port."},
    {
        "role": "assistant",
        "content": "billing/server.py listens on port 5433:\n"
        + "".join(f"def handler_{i}(request):\n    return respond(request, code={i})\n" for i in range(400)),
    },
]
TOO_LONG = raw(
    json.dumps(
        {"error": {"message": "maximum context length is 4096 tokens", "code": "context_length_exceeded"}}
    ).encode(),
    400,
)


def _sent_chars(request: dict) -> int:
    return sum(len(m["content"]) for m in request["messages"])


def test_the_agent_asks_again_with_half_the_context_when_the_window_is_too_small(tmp_path):
    from lantern import Lantern
    from lantern.memory.agent import MemoryAgent

    with Lantern(tmp_path / "a.db") as lt, FakeLLM([TOO_LONG, TOO_LONG, answer("Port 5433.")]) as fake:
        lt.archive(CODE_TURNS, session="old")
        agent = MemoryAgent(lt, "new", fake.settings(), budget=40_000)
        turn = agent.ask("As I said earlier, which port does the billing module listen on?")
        sizes = [_sent_chars(r) for r in fake.requests]
        assert turn.answer == "Port 5433." and turn.generations == 1 and turn.recovered
        assert len(sizes) == 3 and sizes[0] > 20_000 and sizes[1] <= 20_000 and sizes[2] <= 10_000
        assert turn.usage.calls == 3  # the refused calls count
        assert lt.stats()["entries"] == 2  # the question and its answer archived once


def test_the_agent_raises_a_refusal_that_is_not_about_size_at_once_and_archives_nothing(tmp_path):
    from lantern import Lantern
    from lantern.memory.agent import MemoryAgent

    bad = raw(b'{"error": {"message": "Invalid value for temperature"}}', 400)
    with Lantern(tmp_path / "a.db") as lt, FakeLLM([bad]) as fake:
        lt.archive(CODE_TURNS, session="old")
        agent = MemoryAgent(lt, "new", fake.settings(), budget=40_000)
        with pytest.raises(LLMError, match="Invalid value for temperature"):
            agent.ask("As I said earlier, which port does the billing module listen on?")
        assert len(fake.requests) == 1 and lt.stats()["entries"] == 1


def test_the_agent_gives_up_with_the_endpoints_error_when_even_the_question_is_too_long(tmp_path):
    from lantern import Lantern
    from lantern.memory.agent import MemoryAgent

    with Lantern(tmp_path / "a.db") as lt, FakeLLM([TOO_LONG]) as fake:
        agent = MemoryAgent(lt, "new", fake.settings(), budget=4_000)
        with pytest.raises(LLMError, match="maximum context length") as info:
            agent.ask("What next? " + "x" * 1_000)
        assert info.value.context_too_long and 2 <= len(fake.requests) <= 4
        assert _sent_chars(fake.requests[-1]) <= agent.memory.min_budget("What next? " + "x" * 1_000)
