"""What an LLM endpoint's error answer becomes: ``LLMError`` with the endpoint's own message (``detail``), its
``code``, and ``context_too_long`` when the request was refused for its size. The shapes come from a local server
speaking the OpenAI API (tests/openai_fake.py); a real model's refusal is in test_llm_real.py."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget import examples
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


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
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


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=_JSON, status=st.sampled_from([400, 401, 404, 413, 422, 429, 500, 502, 503]))
def test_any_error_body_gives_an_llm_error_with_a_short_clean_detail(body, status):
    e = _error(raw(json.dumps(body).encode(), status))
    assert e.status == status and len(e.detail) <= DETAIL_CHARS
    assert not any(ch < " " for ch in e.detail)
    assert isinstance(e.context_too_long, bool)


def test_a_success_after_an_error_body_is_unaffected():
    with FakeLLM([answer("fine")]) as fake, LLMClient(fake.settings()) as client:
        assert client.chat(MESSAGES).text == "fine"


def test_every_client_verifies_tls_with_one_shared_context(tmp_path):
    """An https endpoint whose certificate no CA of the bundle signed is refused ("unreachable", nothing posted),
    and every client verifies with the one context of the process (lantern/llm.py ``tls_context``) instead of
    loading the CA bundle again."""
    import shutil
    import ssl
    import subprocess

    from lantern.llm import tls_context

    if shutil.which("openssl") is None:
        pytest.skip("no openssl command to make a self-signed certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"]
        + ["-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    server_side = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_side.load_cert_chain(cert, key)
    with FakeLLM([answer("never")]) as fake:
        fake.server.socket = server_side.wrap_socket(fake.server.socket, server_side=True)
        settings_ = LLMSettings(f"https://127.0.0.1:{fake.port}/v1", "fake-model", timeout_s=5.0)
        with LLMClient(settings_) as client, LLMClient(settings_) as other:
            with pytest.raises(LLMError) as info:
                client.chat(MESSAGES)
            shared = {id(c._http._transport._pool._ssl_context) for c in (client, other)}
        assert info.value.kind == "unreachable" and fake.requests == []
        assert shared == {id(tls_context())}
        assert tls_context().verify_mode == ssl.CERT_REQUIRED and tls_context().check_hostname


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


# ---------------------------------------------------------------- ... and remembers what fitted (ContextWindow)
def _context_chars(request: dict) -> int:
    """The characters of the context as the agent counts them (``Context.chars``: the messages joined by blank
    lines)."""
    return _sent_chars(request) + 2 * (len(request["messages"]) - 1)


class Window:
    """A fake endpoint's context window, in characters: a request past ``limit`` is refused for its size."""

    def __init__(self, limit: int, details: int = 0):
        self.limit, self.refused, self.details = limit, 0, details

    def __call__(self, request: dict) -> dict:
        if _context_chars(request) > self.limit:
            self.refused += 1
            return TOO_LONG
        return answer("Port 5433, as you said before." + " The handler details follow." * self.details)


def test_the_agent_does_not_pay_the_refusals_again_at_each_ask_and_probes_rarely(tmp_path):
    from lantern import Lantern
    from lantern.memory.agent import PROBE_AFTER, MemoryAgent

    window = Window(9_000)
    with Lantern(tmp_path / "a.db") as lt, FakeLLM([window]) as fake:
        lt.archive(CODE_TURNS, session="old")
        agent = MemoryAgent(lt, "new", fake.settings(), budget=40_000)
        first = agent.ask("As I said earlier, which port does the billing module listen on?")
        paid = window.refused
        assert paid >= 1 and first.usage.calls == paid + 1
        assert agent.window.fits == first.context.chars == _context_chars(fake.requests[-1]) <= 9_000
        refusals = []
        for i in range(3 * PROBE_AFTER):
            before = window.refused
            turn = agent.ask(f"As I said earlier, which port does the billing module use? ({i})")
            assert turn.answer.startswith("Port 5433")
            refusals.append(window.refused - before)
        # an ask starts from what fitted: no refusal, except on a probe of a larger context now and then (one)
        assert all(n <= 1 for n in refusals) and sum(refusals) <= 3
        assert agent.window.fits >= first.context.chars  # never below what fitted first
        assert agent.window.refused is None or agent.window.refused > agent.window.fits


def test_the_agent_grows_back_when_the_endpoint_takes_more(tmp_path):
    from lantern import Lantern
    from lantern.memory.agent import PROBE_AFTER, MemoryAgent

    window = Window(6_000, details=120)  # long answers: working memory fills every context
    with Lantern(tmp_path / "a.db") as lt, FakeLLM([window]) as fake:
        lt.archive(CODE_TURNS, session="old")
        agent = MemoryAgent(lt, "new", fake.settings(), budget=40_000)
        small = agent.ask("As I said earlier, which port does the billing module listen on?").context.chars
        refused = window.refused
        window.limit = 10**9  # the endpoint now serves a model with a larger window
        sizes = [
            agent.ask(f"As I said earlier, which port does the billing module use? ({i})").context.chars
            for i in range(2 * PROBE_AFTER + 1)
        ]
        assert sizes[-1] > small * 1.2 and min(sizes) >= small * 0.9  # grows by probes, never back down
        assert window.refused == refused


@settings(max_examples=examples(300), deadline=None)
@given(
    limit=st.integers(500, 60_000),
    budget=st.integers(1_000, 80_000),
    sizes=st.lists(st.integers(100, 100_000), min_size=1, max_size=60),
)
def test_the_window_rule_pays_refusals_again_only_on_probes(limit, budget, sizes):
    """The rule alone (memory/agent.py ``ContextWindow``) against an endpoint of a fixed window of ``limit``
    characters, with asks whose whole context would be ``sizes`` characters (what the budget cuts it to is sent):
    once an ask was answered, an ask is refused at most once, and only a probe (at most one per ``PROBE_AFTER``
    asks) is."""
    from lantern.memory.agent import PROBE_AFTER, ContextWindow

    floor = 300
    window = ContextWindow()
    answered_before = False
    later_refusals = 0
    for size in sizes:
        b = max(window.start(budget), floor)
        refusals, answered = 0, False
        while True:
            chars = min(b, size)
            if chars <= limit:
                window.answer(chars)
                answered = True
                break
            window.refusal(chars)
            refusals += 1
            if b <= floor:
                break
            b = max(window.retry(b), floor)
        if answered_before:
            assert answered and refusals <= 1
            later_refusals += refusals
        answered_before = answered_before or answered
        if window.fits is not None and window.refused is not None:
            assert window.fits < window.refused
        if window.fits is not None:
            assert window.fits <= limit
    assert later_refusals <= len(sizes) // PROBE_AFTER + 1


@pytest.mark.parametrize("cap", [None, 7])
def test_chat_max_tokens_reaches_the_endpoint(tmp_path, cap):
    """Issue 37: `lantern chat --max-tokens N` caps every request the chat sends (it was read and dropped); without
    it, the settings' default (256) goes."""
    from clirun import lantern as cli

    with FakeLLM([answer("The port is 5433.")]) as fake:
        args = ["chat", "--once", "which port?", "--llm-base-url", fake.base_url, "--llm-model", "fake-model"]
        done = cli(*args, *(["--max-tokens", str(cap)] if cap else []), db=tmp_path / "c.db")
        assert done.returncode == 0, done.stderr.decode()
        assert fake.requests and {r["max_tokens"] for r in fake.requests} == {cap or 256}


# ---------------------------------------------------------------- an endpoint that refuses the JSON format
SCHEMA = {"type": "object", "properties": {"ids": {"type": "array"}}, "required": ["ids"]}
# llama-cpp-python 0.3's server answering response_format json_schema: a 500 with its validation error and the
# location lines of its traceback inside the message
LLAMA_CPP_REFUSAL = {
    "error": {
        "message": "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
        "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}\n\n"
        '  File "/venv/lib/python3.11/site-packages/llama_cpp/server/app.py", line 376, in create_chat_completion\n'
        "    POST /v1/chat/completions",
        "type": "internal_server_error",
        "param": None,
        "code": None,
    }
}
_NAMES = st.sampled_from(["response_format", "json_schema", "Response_Format.type", "'json_schema'"])
_TRACE = st.sampled_from(
    ["", '\n  File "/srv/app.py", line 3, in f\n    x()', '\nTraceback (most recent call last):\n  File "a", line 1']
)


def _refusing(formats: set[str], body_of=lambda kind: LLAMA_CPP_REFUSAL, code: int = 500):
    """A reply refusing each ``response_format`` type in ``formats`` and answering the others."""

    def reply(request: dict) -> dict:
        kind = (request.get("response_format") or {}).get("type", "none")
        return raw(json.dumps(body_of(kind)).encode(), code) if kind in formats else answer('{"ids": [1]}')

    return reply


def _kinds(fake: FakeLLM) -> list[str]:
    return [(r.get("response_format") or {}).get("type", "none") for r in fake.requests]


def test_llama_cpp_servers_refusal_of_json_schema_falls_back_to_json_object_once_per_client(caplog):
    with FakeLLM([_refusing({"json_schema"})]) as fake, LLMClient(fake.settings()) as client:
        with caplog.at_level("WARNING", logger="lantern"):
            first = client.chat(MESSAGES, json_schema=SCHEMA)
            second = client.chat(MESSAGES, json_schema=SCHEMA)
        again = LLMClient(fake.settings())  # a new client of the same endpoint and model: the same process's memory
        again.chat(MESSAGES, json_schema=SCHEMA)
        again.close()
    assert first.text == second.text == '{"ids": [1]}'
    assert _kinds(fake) == ["json_schema", "json_object", "json_object", "json_object"]
    assert client.usage.calls == 3  # the refused request counted
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "json_schema" in lines[0] and "json_object" in lines[0]
    assert "File" not in lines[0] and "\n" not in lines[0]


@settings(max_examples=examples(40), deadline=None)
@given(
    code=st.sampled_from([400, 422, 500]),
    name=_NAMES,
    trace=_TRACE,
    refused=st.sampled_from([{"json_schema"}, {"json_schema", "json_object"}]),
)
def test_any_refusal_naming_the_format_steps_down_to_a_mode_the_endpoint_takes(code, name, trace, refused):
    body = {"error": {"message": f"unsupported {name} here{trace}"}}
    with FakeLLM([_refusing(refused, lambda kind: body, code)]) as fake, LLMClient(fake.settings()) as client:
        assert client.chat(MESSAGES, json_schema=SCHEMA).text == '{"ids": [1]}'
        assert client.chat(MESSAGES, json_schema=SCHEMA).text == '{"ids": [1]}'
    used = "none" if "json_object" in refused else "json_object"
    assert _kinds(fake) == ["json_schema", *(["json_object"] if used == "none" else []), used, used]


@settings(max_examples=examples(40), deadline=None)
@given(message=st.text(max_size=80).filter(lambda m: not any(w in m.lower() for w in ("json_", "response_format"))))
def test_a_500_that_does_not_name_the_format_is_an_error_at_once(message):
    body = {"error": {"message": message}}
    with FakeLLM([raw(json.dumps(body).encode(), 500)]) as fake, LLMClient(fake.settings()) as client:
        with pytest.raises(LLMError) as info:
            client.chat(MESSAGES, json_schema=SCHEMA)
    assert len(fake.requests) == 1 and info.value.status == 500


@given(trace=_TRACE.filter(bool), head=st.text(st.characters(blacklist_categories=["Cc", "Cs"]), max_size=60))
@settings(max_examples=examples(40), deadline=None)
def test_an_error_message_ends_before_the_servers_traceback(trace, head):
    e = _error(raw(json.dumps({"error": {"message": head + trace}}).encode(), 500))
    assert e.detail == head.strip()[:DETAIL_CHARS]
