"""Conversations shared by the integration tests (written by us)."""

# OpenAI chat messages: the port 5433 lives only in a tool call's arguments and its result
PORT_CONVERSATION = [
    {"role": "user", "content": "Start postgres for the billing service."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "bash", "arguments": '{"cmd": "docker run -p 5433:5432 postgres:16"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "listening on 127.0.0.1:5433"},
    {"role": "user", "content": "Now add a README section about deployment."},
    {"role": "assistant", "content": "Added a Deployment section to README.md."},
]
