"""The Anthropic ``/v1/messages`` path of the proxy under the OpenAI path's compaction scenario (issue 20, item 5;
``test_proxy_forward.test_compaction_injects_the_lost_port``): the same long conversation, the same reply appended,
then a compacted context whose summary sits where an Anthropic client can put it (a user message as a string or as
text blocks, the top-level ``system`` as a string or a list, next to the original prompt or instead of it), plain
and streamed. The lost port comes back in ``system`` every time, the messages go upstream untouched, and turns
still live are not re-injected."""

from __future__ import annotations

import json

import pytest

from test_proxy_forward import _long_conversation, proxy, upstream  # noqa: F401 - the fixtures

SUMMARY = (
    "This session is being continued from a previous conversation that ran out of context. Summary: the user set "
    "up the billing database and refactored the invoice renderer."
)
QUESTION = {"role": "user", "content": "Which port does the billing database listen on?"}
VARIANTS = ("user-string", "user-blocks", "system-appended", "system-replaced", "system-list", "streamed")


def _post(client, body, headers):
    if body.get("stream"):
        with client.stream("POST", "/v1/messages", json=body, headers=headers) as r:
            assert r.status_code == 200
            b"".join(r.iter_raw())
        return None
    r = client.post("/v1/messages", json=body, headers=headers)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.parametrize("variant", VARIANTS)
def test_anthropic_compaction_injects_the_lost_port(proxy, variant):  # noqa: F811
    client, received = proxy
    headers = {"X-Lantern-Session": f"billing-{variant}", "anthropic-version": "2023-06-01"}
    conv = _long_conversation()
    system, conv = conv[0]["content"], conv[1:] + [{"role": "user", "content": "Now run the whole test suite."}]
    body = {"model": "claude-x", "max_tokens": 100, "system": system, "messages": conv}
    if variant == "streamed":
        body["stream"] = True
    reply = _post(client, body, headers)
    assert received[-1]["body"]["system"] == system  # a growing conversation: nothing injected
    conv.append({"role": "assistant", "content": reply["content"] if reply else "Reading the heron config."})
    live = [*conv[-4:], QUESTION]
    compacted = {
        "user-string": {**body, "messages": [{"role": "user", "content": SUMMARY}, *live]},
        "streamed": {**body, "messages": [{"role": "user", "content": SUMMARY}, *live]},
        "user-blocks": {**body, "messages": [{"role": "user", "content": [{"type": "text", "text": SUMMARY}]}, *live]},
        "system-appended": {**body, "system": f"{system}\n\n{SUMMARY}", "messages": live},
        "system-replaced": {**body, "system": SUMMARY, "messages": live},
        "system-list": {
            **body,
            "system": [{"type": "text", "text": system}, {"type": "text", "text": SUMMARY}],
            "messages": live,
        },
    }[variant]
    _post(client, compacted, headers)
    sent = received[-1]["body"]
    assert sent["messages"] == compacted["messages"]  # the block goes into system, the messages are untouched
    block = json.dumps(sent["system"], ensure_ascii=False)
    assert "Recovered from Lantern memory" in block and "5433" in block, block[:300]
    assert "step 9" not in block.split("Recovered from Lantern memory", 1)[1]  # still live: never re-injected
