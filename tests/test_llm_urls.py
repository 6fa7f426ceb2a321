"""The chat-completions URL of a base URL (lantern/llm.py ``endpoint``, ``LLMSettings.url``): the path joined under
the base's path, its query kept (Azure's ``?api-version=``), trailing slashes, fragment and credentials handled by
httpx's URL, for any base URL; the request really reaches that path with that query (tests/openai_fake.py), and an
error masks the credentials wherever the base URL holds them."""

from __future__ import annotations

from urllib.parse import quote

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples
from lantern.llm import LLMClient, LLMError, LLMSettings, endpoint
from openai_fake import FakeLLM, answer, raw

_SEGMENT = (  # "." and ".." are removed by every URL parser (RFC 3986 §5.2.4), before any joining
    st.text(st.characters(codec="utf-8", exclude_characters="/?#"), min_size=1, max_size=8)
    .map(lambda s: quote(s, safe=""))
    .filter(lambda s: s not in (".", ".."))
)
_QUERY = st.lists(
    st.tuples(_SEGMENT, _SEGMENT).map("=".join) | st.just("api-version=2024-06-01"), min_size=1, max_size=3
).map("&".join)


@st.composite
def base_urls(draw) -> dict:
    user = draw(st.none() | st.tuples(_SEGMENT, st.none() | _SEGMENT))
    parts = {
        "scheme": draw(st.sampled_from(["http", "https"])),
        "userinfo": "" if user is None else user[0] + ("" if user[1] is None else ":" + user[1]),
        "host": draw(st.sampled_from(["127.0.0.1", "example.openai.azure.com", "llm.internal", "[::1]"])),
        "port": draw(st.none() | st.integers(1, 65535)),
        "path": "".join("/" + s for s in draw(st.lists(_SEGMENT, max_size=4))),
        "slashes": "/" * draw(st.integers(0, 3)),
        "query": draw(st.none() | _QUERY),
        "fragment": draw(st.none() | _SEGMENT),
    }
    netloc = (parts["userinfo"] + "@" if parts["userinfo"] else "") + parts["host"]
    netloc += f":{parts['port']}" if parts["port"] is not None else ""
    url = f"{parts['scheme']}://{netloc}{parts['path']}{parts['slashes']}"
    url += f"?{parts['query']}" if parts["query"] is not None else ""
    url += f"#{parts['fragment']}" if parts["fragment"] is not None else ""
    return {**parts, "url": url}


@settings(max_examples=examples(300), deadline=None)
@given(base=base_urls())
def test_the_path_is_joined_under_the_base_path_and_the_rest_of_the_url_kept(base):
    got = httpx.URL(LLMSettings(base["url"], "m").url)
    given_url = httpx.URL(base["url"])
    assert got.raw_path.split(b"?")[0] == (base["path"] + "/chat/completions").encode()
    assert got.query == (base["query"] or "").encode()
    assert got.fragment == ""
    assert (got.scheme, got.host, got.port) == (given_url.scheme, given_url.host, given_url.port)
    assert got.userinfo == given_url.userinfo
    # a base that already names the endpoint is not extended again; the URL is stable
    again = LLMSettings(str(got), "m").url
    assert again == str(got)


@settings(max_examples=examples(100), deadline=None)
@given(base=base_urls(), extra=st.none() | _QUERY)
def test_a_forwarded_path_keeps_the_bases_query_then_the_requests(base, extra):
    got = httpx.URL(endpoint(base["url"], "v1/models", extra or ""))
    assert got.raw_path.split(b"?")[0] == (base["path"] + "/v1/models").encode()
    assert got.query == "&".join(q for q in (base["query"], extra) if q).encode()


def test_an_azure_style_base_url_reaches_the_deployment_with_its_api_version():
    with FakeLLM([answer("fine")]) as fake:
        base = f"http://127.0.0.1:{fake.port}/openai/deployments/gpt-4o/?api-version=2024-06-01#ignored"
        with LLMClient(LLMSettings(base, "m", 5.0)) as client:
            assert client.chat([{"role": "user", "content": "hi"}]).text == "fine"
    assert fake.paths == ["/openai/deployments/gpt-4o/chat/completions?api-version=2024-06-01"]


_SECRET = st.text(st.characters(codec="ascii", categories=["L", "N"]), min_size=6, max_size=16)


@settings(max_examples=examples(25), deadline=None)
@given(user=_SECRET, password=_SECRET, key=_SECRET, slashes=st.integers(0, 2))
def test_credentials_anywhere_in_the_base_url_are_masked_in_errors(user, password, key, slashes):
    with FakeLLM([raw(b'{"error": {"message": "no"}}', 401)]) as fake:
        base = f"http://{user}:{password}@127.0.0.1:{fake.port}/v1{'/' * slashes}?api-key={key}"
        with LLMClient(LLMSettings(base, "m", 5.0)) as client, pytest.raises(LLMError) as info:
            client.chat([{"role": "user", "content": "hi"}])
    message = str(info.value)
    assert info.value.status == 401 and "***@127.0.0.1" in message and "/v1/chat/completions?***" in message
    assert not any(secret in message for secret in (user, password, key))
    assert fake.paths == [f"/v1/chat/completions?api-key={key}"]
    assert fake.headers[0]["Authorization"].startswith("Basic ")  # the user info is sent as basic auth
