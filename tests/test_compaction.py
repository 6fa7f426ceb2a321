"""Live compaction detection (compaction.py) on a real store with the fake embedder (tests/conftest.py)."""

from __future__ import annotations

import pytest

from lantern import Lantern
from lantern.compaction import detect, is_summary

SYSTEM = {"role": "system", "content": "You are a coding assistant."}


def conversation() -> list[dict]:
    msgs = [
        SYSTEM,
        {"role": "user", "content": "Start postgres for the billing service."},
        {"role": "assistant", "content": "Started: docker run -p 5433:5432 postgres:16, listening on port 5433."},
    ]
    for i in range(8):
        msgs += [
            {"role": "user", "content": f"Refactor module number {i} of the invoice renderer."},
            {"role": "assistant", "content": f"Refactored renderer module {i}; all {10 + i} tests pass."},
        ]
    return msgs


@pytest.fixture()
def lt(db_location):
    """A new store on each backend (conftest.py ``db_location``: SQLite, then PostgreSQL)."""
    with Lantern(db_location) as lt:
        yield lt


def test_no_compaction_while_the_conversation_grows(lt):
    msgs = conversation()
    assert detect(lt, "s", msgs) is None  # nothing archived yet
    lt.archive(msgs, session="s")
    grown = msgs + [{"role": "user", "content": "Now write the changelog."}]
    assert detect(lt, "s", grown) is None
    # a new conversation under the same session id shares no archived turn: not a compaction
    assert detect(lt, "s", [{"role": "user", "content": "Hello, new topic entirely."}]) is None


def test_claude_code_summary_detected_and_recovery_brings_back_the_port(lt):
    msgs = conversation()
    ids = lt.archive(msgs, session="s").entry_ids
    summary = {
        "role": "system",
        "content": "This session is being continued from a previous conversation that ran out "
        "of context. The user set up the billing database and refactored the invoice renderer.",
    }
    live = [summary, *msgs[-4:], {"role": "user", "content": "Which port does the billing database listen on?"}]
    c = detect(lt, "s", live)
    assert c is not None and c.reason == "summary" and "continued" in c.summary
    assert ids[1] in c.lost_entry_ids and ids[-1] not in c.lost_entry_ids and ids[-2] not in c.lost_entry_ids
    assert "port" in c.query and "billing" in c.query
    rec = c.recover(lt, budget=3000)
    assert "5433" in rec.text
    assert all(e.id not in (ids[-1], ids[-2]) for e in rec.entries)  # still live: never re-injected


def test_dropped_turns_without_summary(lt):
    msgs = conversation()
    ids = lt.archive(msgs, session="s").entry_ids
    live = [SYSTEM, *msgs[-6:]]  # the client kept its system prompt and a window of recent turns
    c = detect(lt, "s", live)
    assert c is not None and c.reason == "dropped" and c.summary is None
    assert ids[1] in c.lost_entry_ids and ids[0] not in c.lost_entry_ids  # system prompt still live
    assert detect(lt, "other-session", live) is None


@pytest.mark.parametrize(
    "text,role,expected",
    [
        ("[Summary] earlier work", "system", True),
        ("Summary of the conversation so far: ...", "user", True),
        ("<summary>the user asked</summary>", "system", True),
        ("This session is being continued from a previous conversation that ran out of context.", "user", True),
        ("Please write a summary of the conversation", "user", False),
        ("[Summary] quoted by the assistant", "assistant", False),
    ],
)
def test_is_summary(text, role, expected):
    assert is_summary({"role": role, "content": text}) is expected
    assert is_summary({"role": role, "content": [{"type": "text", "text": text}]}) is expected


# ---------------------------------------------------------------------------------------------- Tracker (incremental)
def _brute_present(lt, session, messages) -> set[int]:
    from lantern.text.clean import normalize_space

    live = lt.live_text(messages)
    return {i for i, _turn, text in lt.store.session_turns(session) if normalize_space(text) in live}


def _reply(i: int) -> dict:
    return {"role": "assistant", "content": f"Request {i} handled: renderer check {i * 7} passed, file src/mod_{i}.py."}


def test_tracker_matches_stateless_detect_over_a_long_conversation(lt):
    from lantern.compaction import Tracker

    tracker = Tracker(lt)
    msgs = conversation()
    events = []
    for i in range(30):  # a conversation growing request by request, archived as the proxy does
        msgs = msgs + [{"role": "user", "content": f"Request {i}: check renderer part {i}."}]
        event, current = tracker.observe("s", msgs)
        expected = detect(lt, "s", msgs)
        assert (current is None) == (expected is None)
        assert tracker.seen[tracker.key("s", lt.scope)].present == _brute_present(lt, "s", msgs)
        events.append(event)
        lt.archive(msgs, session="s")
        msgs = msgs + [_reply(i)]
        lt.archive(msgs, session="s")
    assert events == [None] * 30
    # a compaction after many requests is still detected, with the same lost entries as the stateless detect
    summary = {
        "role": "user",
        "content": "This session is being continued from a previous conversation that ran out of "
        "context. The user set up billing and checked the renderer thirty times.",
    }
    compacted = [SYSTEM, summary, *msgs[-4:], {"role": "user", "content": "Which port does billing listen on?"}]
    event, current = tracker.observe("s", compacted)
    expected = detect(lt, "s", compacted)
    assert event is current and event.reason == "summary"
    assert event.lost_entry_ids == expected.lost_entry_ids and len(event.lost_entry_ids) > 30
    live_ids = tracker.seen[tracker.key("s", lt.scope)].present
    assert live_ids == _brute_present(lt, "s", compacted) and len(live_ids) >= 3  # system prompt + the 2 kept turns
    assert not live_ids & set(event.lost_entry_ids)
    # the same compacted context growing: an ongoing compaction, not a new one
    lt.archive(compacted, session="s")
    grown = compacted + [
        {"role": "assistant", "content": "It listens on 5433."},
        {"role": "user", "content": "Thanks."},
    ]
    event, current = tracker.observe("s", grown)
    assert event is None and current is not None and current.reason == "summary"
    # an old turn pasted back at the end (the conversation still grows): found in the new tail, present again
    port_turn = next(i for i, _t, text in lt.store.session_turns("s") if "5433:5432" in text)
    assert port_turn not in tracker.seen[tracker.key("s", lt.scope)].present
    resent = grown + [msgs[1], msgs[2], {"role": "user", "content": "Same setup again, please."}]
    tracker.observe("s", resent)
    assert port_turn in tracker.seen[tracker.key("s", lt.scope)].present and tracker.seen[
        tracker.key("s", lt.scope)
    ].present == _brute_present(lt, "s", resent)
    grown = resent
    # a window that drops a turn the previous request still held is a new compaction
    window = [SYSTEM, *grown[4:-3]]
    event, _ = tracker.observe("s", window)
    assert event is not None and tracker.seen[tracker.key("s", lt.scope)].present == _brute_present(lt, "s", window)


def test_tracker_sees_another_process_archive_and_forget(tmp_path):
    """A second PROCESS writes the same database between two requests: the tracker's next call sees it."""
    import json
    import subprocess
    import sys

    from lantern.compaction import Tracker

    path = tmp_path / "shared.db"
    msgs = conversation()
    with Lantern(path) as lt:
        tracker = Tracker(lt)
        assert tracker.observe("s", msgs) == (None, None)
        lt.archive(msgs, session="s")
        assert tracker.observe("s", msgs) == (None, None)
        other = [
            {"role": "user", "content": "Deploy the zebra-9 service to staging."},
            {"role": "assistant", "content": "Deployed zebra-9 to staging; health check green on port 7311."},
        ]
        script = (
            "import json, sys\nfrom lantern import Lantern\n"
            "with Lantern(sys.argv[1]) as lt:\n"
            "    lt.archive(json.loads(sys.argv[2]), session='s')\n"
            "    print(lt.forget(entry=int(sys.argv[3]), vacuum=False))\n"
        )
        first_user_turn = lt.archive(msgs, session="s").entry_ids[1]
        done = subprocess.run(
            [sys.executable, "-c", script, str(path), json.dumps(other), str(first_user_turn)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        # the live context now holds only the system prompt and the other process's turn: turns 2.. were dropped
        live = [SYSTEM, *other, {"role": "user", "content": "Is zebra-9 healthy?"}]
        event, current = tracker.observe("s", live)
        expected = detect(lt, "s", live)
        assert event is not None and event.reason == "dropped" == expected.reason
        assert event.lost_entry_ids == expected.lost_entry_ids
        other_id = lt.store.db.execute("SELECT id FROM entries WHERE text LIKE '%zebra-9 to staging%'").fetchone()[0]
        assert other_id in tracker.seen[tracker.key("s", lt.scope)].present and other_id not in event.lost_entry_ids
        assert first_user_turn not in event.lost_entry_ids  # forgotten by the other process: not lost, gone
        assert tracker.seen[tracker.key("s", lt.scope)].present == _brute_present(lt, "s", live)


def test_tracker_after_a_forget_and_an_archive_on_the_same_connection(lt):
    from lantern.compaction import Tracker

    tracker = Tracker(lt)
    msgs = conversation()
    ids = lt.archive(msgs, session="s").entry_ids
    assert tracker.observe("s", msgs) == (None, None)
    lt.forget(entry=ids[3], vacuum=False)  # same connection: the count alone would not show delete + insert
    lt.archive([{"role": "user", "content": "Add the audit log to the renderer."}], session="s")
    live = [SYSTEM, *msgs[-4:], {"role": "user", "content": "Add the audit log to the renderer."}]
    event, current = tracker.observe("s", live)
    expected = detect(lt, "s", live)
    assert event is not None and event.lost_entry_ids == expected.lost_entry_ids and ids[3] not in event.lost_entry_ids
    assert tracker.seen[tracker.key("s", lt.scope)].present == _brute_present(lt, "s", live)
    assert set(tracker.seen[tracker.key("s", lt.scope)].archive.hash) == {
        i for i, _t, _x in lt.store.session_turns("s")
    }


def test_tracker_keeps_a_bounded_number_of_sessions(lt):
    from lantern.compaction import Tracker

    tracker = Tracker(lt, max_sessions=2)
    msgs = conversation()
    for s in ("a", "b", "c"):
        lt.archive(msgs, session=s)
        tracker.observe(s, msgs)
    assert [session for session, _scope in tracker.seen] == ["b", "c"]
    tracker.observe("b", msgs)
    tracker.observe("a", [SYSTEM, *msgs[-2:]])  # "a" again: a first request, its compaction is an event
    assert [session for session, _scope in tracker.seen] == ["b", "a"]
    event, current = tracker.observe("a", [SYSTEM, *msgs[-2:]])
    assert event is None and current is not None and current.reason == "dropped"


def test_the_recovery_query_leaves_out_the_summary_template():
    """Claude Code's fixed opening ("This session is being continued from a previous conversation that ran out
    of context. The conversation is summarized below:") says nothing about the work: its words (session,
    conversation, context, summarized) would match any turn about sessions and cost a full-text term each. The
    query keeps the summary's own text, with the last user message."""
    from lantern.compaction import summary_query, summary_query_text

    opening = "This session is being continued from a previous conversation that ran out of context. "
    assert (
        summary_query_text(
            opening + "The conversation is summarized below:\nAnalysis:\nThe user moved the database to port 5433."
        )
        == "Analysis:\nThe user moved the database to port 5433."
    )
    assert summary_query_text(opening + "Summary: billing runs on port 5433.") == "billing runs on port 5433."
    assert summary_query_text("[Summary] port 5433") == "[Summary] port 5433"  # other summaries are kept whole
    assert (
        summary_query_text("We kept this session is being continued ...")
        == "We kept this session is being continued ..."
    )
    # only the literal sentence goes (a breaker's finding: the first version cut everything up to a "." or ":")
    handoff = "This session is being continued from a previous conversation where we moved billing-db to port 5433"
    assert summary_query_text(handoff + "\nNext: tests") == "where we moved billing-db to port 5433\nNext: tests"
    assert (
        summary_query_text(opening + "At 12:30 UTC the deploy of app.yaml failed.")
        == "At 12:30 UTC the deploy of app.yaml failed."
    )
    messages = [
        {"role": "user", "content": opening + "Summary: the renderer writes to /srv/out."},
        {"role": "user", "content": "where does it write?"},
    ]
    summary, query = summary_query(messages)
    assert summary.startswith("This session") and query == "where does it write?\nthe renderer writes to /srv/out."


def test_a_new_tracker_settles_the_rewinds_an_earlier_one_suggested(lt):
    """Rewind candidates outlive their Tracker (a proxy restart): kept in the store (``save_rewinds``), one new
    tracker confirms the rewind from them, as the first would have, instead of reading the rewound turns as dropped
    by a compaction. A refuted candidate is dropped from the store, on both backends."""
    from lantern.compaction import Tracker

    msgs = conversation()
    lt.archive(msgs, session="s")
    edited = [*msgs[:5], {"role": "user", "content": "Refactor module number 1 differently: split it in two."}]
    event, current = Tracker(lt).observe("s", edited)  # a candidate only: no compaction, nothing confirmed
    assert event is None and (current is None or not current.lost_entry_ids)
    rewound = [i for i, turn, _ in lt.store.session_turns("s") if turn >= 3]
    lt.archive(edited, session="s")
    went_on = [*edited, {"role": "assistant", "content": "Split module 1 into two files."}]
    lt.archive(went_on, session="s")
    went_on.append({"role": "user", "content": "Now run the tests of module 1."})
    tracker = Tracker(lt)  # restarted
    event, current = tracker.observe("s", went_on)
    assert tracker.seen[tracker.key("s", lt.scope)].abandoned == rewound
    assert current is None or not set(current.lost_entry_ids) & set(rewound)
    conversation_key = (lt.scope.user, "", "", "s")
    assert [i for i, _ in lt.store.open_rewinds(conversation_key)[0][0]] == rewound  # until the proxy moves them
    lt.abandon(dict.fromkeys(rewound, "abandoned-x"), keep=True)
    Tracker(lt).observe("s", [*went_on, {"role": "assistant", "content": "Tests pass."}])
    assert lt.store.open_rewinds(conversation_key) == []  # its turns left the session: the record goes
    # refuted: a candidate whose turns come back is dropped, in the store too
    msgs2 = conversation()
    lt.archive(msgs2, session="t")
    Tracker(lt).observe("t", msgs2[:5])
    assert lt.store.open_rewinds((lt.scope.user, "", "", "t"))
    Tracker(lt).observe("t", [*msgs2, {"role": "user", "content": "And the docs?"}])
    assert lt.store.open_rewinds((lt.scope.user, "", "", "t")) == []
    # forgotten: a forget takes its entries out of the open candidates in its own transaction
    Tracker(lt).observe("t", msgs2[:5])
    assert lt.store.open_rewinds((lt.scope.user, "", "", "t"))
    lt.forget(session="t")
    assert lt.store.open_rewinds((lt.scope.user, "", "", "t")) == []
