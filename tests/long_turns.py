"""Realistic long-turn transcripts, written for the tests and benchmarks/bench_long_turns.py (issue #19, item 1).

A coding agent's turn often carries a tool result of 100 KB or more (a whole test run, a log) or tool-call arguments
of tens of KB (a whole file written). Each builder returns a transcript in a real format, the question a user asks
after a compaction, and the string the recovered block must hold to answer it:

- ``claude_code_pytest``: a Claude Code session file (JSONL records as Claude Code writes them: ``uuid`` /
  ``parentUuid`` chains, streamed assistant records, ``tool_use`` / ``tool_result`` blocks). One turn runs the full
  suite with ``pytest -v``: ~115 KB of output whose one failing test is named in the FAILURES section and the short
  summary at its very end. Asked: which test failed.
- ``openai_write_file``: an OpenAI chat with a ``write_file`` tool call whose JSON arguments hold a 24 KB settings
  module; ``RETENTION_DAYS`` is set about 60% of the way in. Asked: the retention value.
- ``task_statement``: a 4 KB task statement that mentions the staging database many times, and later a short turn
  that gives its port. Asked: the port, at small budgets.

Every transcript also holds ordinary turns of the same session (short test runs, edits, reads) sharing the
vocabulary of the question, as a real session would. Deterministic: the same call gives the same bytes.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

__all__ = [
    "Scenario",
    "claude_code_pytest",
    "openai_write_file",
    "pytest_output",
    "scenarios",
    "settings_module",
    "task_statement",
]

START = datetime(2026, 11, 20, 9, 0, 0, tzinfo=timezone.utc)
FAILING_TEST = "tests/billing/test_webhooks.py::test_retry_gives_up_after_five_attempts"
FAILING_ERROR = "AssertionError: assert 6 == 5"
RETENTION = "RETENTION_DAYS = 45"


@dataclass
class Scenario:
    """A transcript (``path`` to ingest, or ``messages`` to archive), the questions a user asks after the
    compaction, each with the string the block must contain to answer it (``asks``), and how big its long turn is."""

    name: str
    asks: list[tuple[str, str]]
    long_chars: int
    path: Path | None = None
    messages: list[dict] | None = None


# ------------------------------------------------------------------------------------------------ pytest output
_MODULES = [
    "api/test_accounts",
    "api/test_auth",
    "api/test_invoices",
    "api/test_pagination",
    "billing/test_currency",
    "billing/test_invoices",
    "billing/test_ledger",
    "billing/test_proration",
    "billing/test_refunds",
    "billing/test_tax",
    "billing/test_webhooks",
    "core/test_config",
    "core/test_events",
    "core/test_retry",
    "db/test_migrations",
    "db/test_pool",
    "workers/test_scheduler",
    "workers/test_queue",
]
_VERBS = ["creates", "rejects", "rounds", "retries", "parses", "lists", "updates", "cancels", "refunds", "renders"]
_NOUNS = [
    "invoice",
    "account",
    "refund",
    "webhook",
    "currency",
    "ledger_entry",
    "token",
    "page",
    "tax_rate",
    "schedule",
    "event",
    "migration",
]
_TAILS = ["", "_when_empty", "_with_unicode", "_over_limit", "_twice", "_for_eu", "_after_timeout", "_in_order"]


def pytest_output(target_chars: int = 115_000, seed: int = 7) -> str:
    """A ``pytest -v`` run of a billing service: the session header, one ``PASSED`` / ``SKIPPED`` line per test
    (with the progress percentage), one ``FAILED`` test near the end (``FAILING_TEST``), its traceback in the
    FAILURES section, a warnings summary and the short test summary, about ``target_chars`` characters."""
    rng = random.Random(seed)
    names: list[str] = []
    seen: set[str] = set()
    size = 2_600  # the header, the FAILURES section and the summaries
    while size < target_chars:
        module = rng.choice(_MODULES)
        name = f"tests/{module}.py::test_{rng.choice(_VERBS)}_{rng.choice(_NOUNS)}{rng.choice(_TAILS)}"
        if rng.random() < 0.3:
            name += f"[{rng.choice(['eur', 'usd', 'gbp', 'jpy', 'chf'])}-{rng.randint(1, 99)}]"
        if name not in seen and not name.startswith("tests/billing/test_webhooks.py::test_retr"):
            seen.add(name)
            names.append(name)
            size += len(name) + len(" PASSED [ 42%]\n")
    fail_at = len(names) - max(3, len(names) // 50)  # at ~98%: the last module to run
    names.insert(fail_at, FAILING_TEST)
    total = len(names)
    lines = [
        "============================= test session starts ==============================",
        "platform linux -- Python 3.11.9, pytest-8.3.3, pluggy-1.5.0 -- /home/dev/billing/.venv/bin/python",
        "cachedir: .pytest_cache",
        "rootdir: /home/dev/billing",
        "configfile: pyproject.toml",
        "plugins: anyio-4.4.0, cov-5.0.0, xdist-3.6.1",
        f"collecting ... collected {total} items",
        "",
    ]
    skipped = 0
    for i, name in enumerate(names, 1):
        if name == FAILING_TEST:
            status = "FAILED"
        elif rng.random() < 0.01:
            status, skipped = "SKIPPED (needs STRIPE_TEST_KEY)", skipped + 1
        else:
            status = "PASSED"
        lines.append(f"{name} {status} [{100 * i // total:>3}%]")
    lines += [
        "",
        "=================================== FAILURES ===================================",
        "___________________ test_retry_gives_up_after_five_attempts ____________________",
        "",
        "fake_clock = <tests.conftest.FakeClock object at 0x7f2d9c1b3e50>",
        "stub_endpoint = <tests.conftest.StubEndpoint url='http://127.0.0.1:48213/hook'>",
        "",
        "    def test_retry_gives_up_after_five_attempts(fake_clock, stub_endpoint):",
        "        stub_endpoint.fail_with(503)",
        "        sender = WebhookSender(stub_endpoint.url, clock=fake_clock, max_attempts=5)",
        "        with pytest.raises(DeliveryFailed):",
        "            sender.deliver({'event': 'invoice.paid', 'id': 'evt_1'})",
        ">       assert stub_endpoint.calls == 5",
        f"E       {FAILING_ERROR}",
        "E        +  where 6 = <tests.conftest.StubEndpoint url='http://127.0.0.1:48213/hook'>.calls",
        "",
        "tests/billing/test_webhooks.py:88: AssertionError",
        "=============================== warnings summary ===============================",
        "billing/currency.py:14",
        "  /home/dev/billing/billing/currency.py:14: DeprecationWarning: 'locale.getdefaultlocale' is deprecated",
        "",
        "-- Docs: https://docs.pytest.org/en/stable/how-to/capture-warnings.html",
        "=========================== short test summary info ============================",
        f"FAILED {FAILING_TEST} - {FAILING_ERROR}",
        f"============ 1 failed, {total - 1 - skipped} passed, {skipped} skipped, 1 warning in 48.12s ============",
    ]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ Claude Code
class _ClaudeCodeWriter:
    """Records as Claude Code writes them to ``~/.claude/projects/<project>/<session>.jsonl``."""

    SESSION = "5b0e2c7a-91d4-4f3e-a8c2-6d1f0e9b7a35"

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.n = 0
        self.parent: str | None = None
        self.clock = START

    def _uuid(self) -> str:
        self.n += 1
        return f"{self.n:08x}-4a1b-4c2d-8e3f-{self.n:012x}"

    def _record(self, kind: str, message: dict, **extra) -> None:
        uuid = self._uuid()
        self.clock += timedelta(seconds=7)
        record = {
            "parentUuid": self.parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": "/home/dev/billing",
            "sessionId": self.SESSION,
            "version": "2.1.30",
            "gitBranch": "webhook-retries",
            "type": kind,
            "uuid": uuid,
            "timestamp": self.clock.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
            "message": message,
            **extra,
        }
        self.lines.append(json.dumps(record, ensure_ascii=False))
        self.parent = uuid

    def user(self, text: str) -> None:
        self._record("user", {"role": "user", "content": text})

    def assistant(self, text: str, tool: tuple[str, dict] | None = None) -> str | None:
        """An assistant API message streamed as one record per block (text, then tool_use); the tool_use id."""
        msg_id = f"msg_01{self.n:06d}"
        base = {"id": msg_id, "type": "message", "role": "assistant", "model": "claude-sonnet-4-5"}
        usage = {"input_tokens": 4, "cache_read_input_tokens": 18022, "output_tokens": 120}
        self._record(
            "assistant",
            {**base, "content": [{"type": "text", "text": text}], "stop_reason": None, "usage": usage},
            requestId=f"req_{self.n:06d}",
        )
        if tool is None:
            return None
        call_id = f"toolu_01{self.n:06d}"
        block = {"type": "tool_use", "id": call_id, "name": tool[0], "input": tool[1]}
        self._record(
            "assistant",
            {**base, "content": [block], "stop_reason": "tool_use", "usage": usage},
            requestId=f"req_{self.n:06d}",
        )
        return call_id

    def result(self, call_id: str, output: str, is_error: bool = False) -> None:
        block = {"tool_use_id": call_id, "type": "tool_result", "content": output, "is_error": is_error}
        stdout, stderr = (output, "") if not is_error else ("", output)
        self._record(
            "user",
            {"role": "user", "content": [block]},
            toolUseResult={"stdout": stdout, "stderr": stderr, "interrupted": False, "isImage": False},
        )

    def step(self, user: str, say: str, tool: tuple[str, dict], output: str, done: str) -> None:
        """One turn: the user's message, the assistant's text and tool call, the result, the assistant's reply."""
        self.user(user)
        call = self.assistant(say, tool)
        assert call is not None
        self.result(call, output)
        self.assistant(done)


def _short_run(module: str, tests: list[str], seconds: float) -> str:
    lines = [
        "============================= test session starts ==============================",
        "platform linux -- Python 3.11.9, pytest-8.3.3, pluggy-1.5.0",
        "rootdir: /home/dev/billing",
        f"collected {len(tests)} items",
        "",
    ]
    lines += [f"{module}::{t} PASSED [{100 * (i + 1) // len(tests):>3}%]" for i, t in enumerate(tests)]
    lines.append(f"============================== {len(tests)} passed in {seconds:.2f}s ==============================")
    return "\n".join(lines)


def claude_code_pytest(folder: Path, output_chars: int = 115_000) -> Scenario:
    """The Claude Code session file of a webhook-retry change whose full test run (~``output_chars`` characters of
    ``pytest -v`` output) fails one test at its end; ordinary turns before and after it."""
    w = _ClaudeCodeWriter()
    w.step(
        "The webhook sender should retry failed deliveries with exponential backoff, at most five attempts.",
        "I'll look at the current sender first.",
        ("Read", {"file_path": "/home/dev/billing/billing/webhooks.py"}),
        "     1\timport httpx\n     2\t\n     3\tclass WebhookSender:\n     4\t    def __init__(self, url, clock):\n"
        "     5\t        self.url, self.clock = url, clock\n     6\t\n     7\t    def deliver(self, payload):\n"
        "     8\t        return httpx.post(self.url, json=payload, timeout=10)\n",
        "The sender posts once with a 10 s timeout and never retries.",
    )
    w.step(
        "Go ahead and add the retry loop.",
        "Adding a retry loop with backoff 1, 2, 4, 8 s.",
        (
            "Edit",
            {
                "file_path": "/home/dev/billing/billing/webhooks.py",
                "old_string": "        return httpx.post(self.url, json=payload, timeout=10)",
                "new_string": "        for attempt in range(self.max_attempts + 1):\n            ...",
            },
        ),
        "The file /home/dev/billing/billing/webhooks.py has been updated.",
        "Added the loop; max_attempts defaults to 5.",
    )
    w.step(
        "Run the webhook tests.",
        "Running the webhook module's tests.",
        ("Bash", {"command": "pytest tests/billing/test_webhooks.py -q", "description": "Run webhook tests"}),
        _short_run(
            "tests/billing/test_webhooks.py",
            ["test_deliver_posts_json", "test_deliver_sets_signature", "test_backoff_doubles"],
            0.41,
        ),
        "All 3 webhook tests pass.",
    )
    w.step(
        "Now run the whole suite, verbose, so we see everything before I merge.",
        "Running the full suite with -v.",
        ("Bash", {"command": "pytest -v", "description": "Run the full test suite verbosely"}),
        pytest_output(output_chars),
        "The full run finished; one test failed, the rest passed.",
    )
    w.step(
        "Also update the changelog for the retry change.",
        "Adding a changelog entry.",
        (
            "Edit",
            {
                "file_path": "/home/dev/billing/CHANGELOG.md",
                "old_string": "## Unreleased\n",
                "new_string": "## Unreleased\n- Webhook deliveries retry with exponential backoff.\n",
            },
        ),
        "The file /home/dev/billing/CHANGELOG.md has been updated.",
        "Changelog updated under Unreleased.",
    )
    w.step(
        "Run the ledger tests too, I touched the fixtures.",
        "Running the ledger tests.",
        ("Bash", {"command": "pytest tests/billing/test_ledger.py -q", "description": "Run ledger tests"}),
        _short_run(
            "tests/billing/test_ledger.py",
            ["test_post_entry", "test_balance_after_refund", "test_entries_in_order", "test_reverse_entry"],
            0.77,
        ),
        "All 4 ledger tests pass.",
    )
    w.user("Write a short docstring for WebhookSender.deliver.")
    w.assistant("Done: deliver() now documents the retry schedule and the DeliveryFailed it raises.")
    path = folder / f"{_ClaudeCodeWriter.SESSION}.jsonl"
    path.write_text("\n".join(w.lines) + "\n", encoding="utf-8")
    return Scenario(
        "claude-code pytest -v, 115 KB output",
        [
            ("Which test was failing at the end of the full test run?", "test_retry_gives_up_after_five_attempts"),
            ("What assertion error did the full pytest run end with?", FAILING_ERROR),
        ],
        len(pytest_output(output_chars)),
        path=path,
    )


# ------------------------------------------------------------------------------------------------ write_file
_SETTINGS_SECTIONS = [
    ("HTTP", ["TIMEOUT_SECONDS = 30", "MAX_CONNECTIONS = 100", "KEEPALIVE_SECONDS = 15", "USER_AGENT = 'billing/2.4'"]),
    ("DATABASE", ["POOL_SIZE = 20", "POOL_RECYCLE_SECONDS = 1800", "STATEMENT_TIMEOUT_MS = 15000"]),
    ("CACHE", ["CACHE_TTL_SECONDS = 300", "CACHE_MAX_ENTRIES = 50000", "CACHE_NAMESPACE = 'billing'"]),
    ("QUEUE", ["QUEUE_PREFETCH = 8", "QUEUE_VISIBILITY_SECONDS = 120", "DEAD_LETTER_AFTER = 7"]),
    ("EXPORTS", ["EXPORT_BATCH_ROWS = 5000", "EXPORT_FORMAT = 'parquet'", "EXPORT_BUCKET = 'billing-exports'"]),
]


def settings_module(target_chars: int = 24_000, seed: int = 11) -> str:
    """A ~``target_chars``-character Django-style settings module: sections of constants with comments, the
    audit-log section (``RETENTION``) about 60% of the way in."""
    rng = random.Random(seed)
    blocks: list[str] = ['"""Settings of the billing service. Values may be overridden by BILLING_* variables."""\n']
    n = 0
    audit_at = None
    while sum(len(b) for b in blocks) < target_chars:
        if audit_at is None and sum(len(b) for b in blocks) > 0.6 * target_chars:
            audit_at = len(blocks)
            blocks.append(
                "# --- audit log -------------------------------------------------------------\n"
                "# how long audit events are kept before the nightly purge deletes them (legal asked for 45)\n"
                f"{RETENTION}\n"
                "AUDIT_LOG_TABLE = 'audit_events'\n"
                "AUDIT_PURGE_HOUR_UTC = 3\n\n"
            )
            continue
        title, values = _SETTINGS_SECTIONS[n % len(_SETTINGS_SECTIONS)]
        n += 1
        region = rng.choice(["EU", "US", "APAC"])
        lines = [f"# --- {title.lower()} ({region}, profile {n}) " + "-" * 40]
        for v in values:
            key, value = v.split(" = ")
            lines.append(f"# {key.lower().replace('_', ' ')} for the {region} deployment")
            lines.append(f"{region}_{key}_{n} = {value}")
        blocks.append("\n".join(lines) + "\n\n")
    return "".join(blocks)


def openai_write_file(chars: int = 24_000) -> Scenario:
    """An OpenAI chat in which the assistant writes a ~``chars``-character settings module with one ``write_file``
    tool call; the question asks for the audit-log retention set deep inside it."""
    content = settings_module(chars)
    messages: list[dict] = [
        {"role": "system", "content": "You are a coding agent working in /srv/billing. Use the tools to edit files."},
        {"role": "user", "content": "Split the settings into one module, config/settings.py, with every section."},
    ]
    messages.append(
        {
            "role": "assistant",
            "content": "Writing config/settings.py with all sections.",
            "tool_calls": [
                {
                    "id": "call_w1",
                    "type": "function",
                    "function": {
                        "name": "write_file",
                        "arguments": json.dumps({"path": "config/settings.py", "content": content}),
                    },
                }
            ],
        }
    )
    messages += [
        {"role": "tool", "tool_call_id": "call_w1", "content": f"wrote {len(content)} bytes to config/settings.py"},
        {"role": "assistant", "content": "config/settings.py is written; every section is in it."},
    ]
    for user, reply in (
        ("Add a test that the settings import.", "Added tests/test_settings.py::test_import."),
        ("What does the cache TTL default to?", "CACHE_TTL_SECONDS is 300 in every region."),
        ("Rename EXPORT_BUCKET for staging.", "Staging uses billing-exports-staging now."),
        ("Make the queue prefetch configurable.", "QUEUE_PREFETCH reads BILLING_QUEUE_PREFETCH, default 8."),
        ("Document the settings in the README.", "README.md has a Settings section listing each one."),
        ("Check the settings for unused values.", "Two unused: EU_USER_AGENT_1 and US_USER_AGENT_6."),
    ):
        messages += [{"role": "user", "content": user}, {"role": "assistant", "content": reply}]
    return Scenario(
        "openai write_file, 24 KB arguments",
        [
            ("What retention_days value did we set in the settings file?", RETENTION),
            ("How long do we keep audit events before the purge?", RETENTION),
        ],
        len(json.dumps({"path": "config/settings.py", "content": content})),
        messages=messages,
    )


# ------------------------------------------------------------------------------------------------ task statement
def _statement(target_chars: int = 4_000) -> str:
    paragraphs = [
        "Task: move the billing service's staging environment onto the new staging database cluster before the "
        "quarter-end freeze. The staging database today is a single Postgres 13 instance that the team shares "
        "with the reporting jobs, and it falls over whenever the nightly export runs.",
        "Requirements. The staging database must run Postgres 16, with logical replication from production "
        "masked by the anonymizer, and PgBouncer in front of it. Every service that talks to the staging "
        "database (api, workers, scheduler, exports) must read its host, port and credentials from the "
        "BILLING_DB_* variables, never from a hard-coded value. The staging database port and host will be "
        "given by the platform team once the cluster is provisioned; do not guess them.",
        "Migration steps. First freeze schema changes on staging. Then take a logical dump of the staging "
        "database, restore it into the new cluster, and run the migrations to head. Point the workers at the new "
        "staging database first, watch the queue depth for an hour, then move the api and the scheduler. Keep "
        "the old staging database read-only for two weeks in case we need to compare rows.",
        "Acceptance. The staging smoke tests pass against the new staging database; the nightly export "
        "finishes in under 20 minutes; the reporting jobs no longer share a database with staging; the runbook "
        "in docs/runbooks/staging-db.md says how to fail back. Connection errors on the staging database must "
        "page the on-call channel, not the whole team.",
        "Out of scope: production, the analytics warehouse, and the read replicas. Questions about the staging "
        "database go to the platform channel; questions about the billing code go to me.",
    ]
    text = "\n\n".join(paragraphs)
    rng = random.Random(3)
    notes = [
        "Note: the staging database credentials rotate monthly, so read them at start-up, not at import time.",
        "Note: the anonymizer masks email, name and card_last4 columns; it must keep invoice totals exact.",
        "Note: the port of the old staging database stays open until the two weeks are over.",
        "Note: PgBouncer runs in transaction mode; session-level advisory locks will not work on staging.",
    ]
    while len(text) < target_chars:
        text += "\n\n" + rng.choice(notes)
    return text[:target_chars]


def task_statement(chars: int = 4_000) -> Scenario:
    """A ~``chars``-character task statement about the staging database, ordinary turns, and one short turn that
    gives the new staging database's host and port; the questions ask for them."""
    messages: list[dict] = [
        {"role": "user", "content": _statement(chars)},
        {"role": "assistant", "content": "Understood. I'll start with the schema freeze and the logical dump."},
        {"role": "user", "content": "Freeze is in place; go ahead with the dump."},
        {"role": "assistant", "content": "The dump of staging finished: 3.1 GB, 212 tables."},
        {
            "role": "user",
            "content": "Platform finished provisioning. Connection details: db-stg-2.internal, port 6432, "
            "user billing_app.",
        },
        {"role": "assistant", "content": "Noted; I'll use them through BILLING_DB_HOST and BILLING_DB_PORT."},
        {"role": "user", "content": "Restore the dump and run the migrations."},
        {"role": "assistant", "content": "Restored into the new cluster; migrations are at head (0147)."},
        {"role": "user", "content": "Point the workers at it and watch the queue."},
        {"role": "assistant", "content": "Workers moved; queue depth steady at 40-60 for the hour."},
        {"role": "user", "content": "Move the api and the scheduler now."},
        {"role": "assistant", "content": "api and scheduler moved; smoke tests pass against the new cluster."},
    ]
    return Scenario(
        "4 KB task statement vs a short answer",
        [
            ("What are the connection details of the new staging database?", "6432"),
            ("Where does the new staging database run?", "db-stg-2.internal"),
        ],
        chars,
        messages=messages,
    )


def scenarios(folder: Path) -> list[Scenario]:
    """Every scenario above, files written under ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    return [claude_code_pytest(folder), openai_write_file(), task_statement()]
