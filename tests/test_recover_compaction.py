"""``Lantern.recover_compaction``: what a compaction lost, packed within the budget (recover/loss.py, loss_pack.py).

Generated coding sessions (paths, commands, flags, ports, identifiers) archived in the real SQLite store with the
real embedder; a summary that states some of their specifics; the live tail. Properties: the block never exceeds
the budget; every packed item is a value of an archived, non-live turn that neither the summary nor the live
context states, traceable to the entry it was seen in; bad input gets an empty block with its reason.
"""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from budget import examples
from lantern import Lantern
from lantern.recover.loss import commands, find_loss
from lantern.recover.loss_pack import EXCERPTS, TITLE, VERBATIM, pack_loss

DIRS = ["src/billing", "cmd/entire/cli", "apps/web/src/services", "tests/e2e"]
NAMES = ["ledger", "pool", "registry", "strategy", "checkpoint", "session_state", "invoice"]
EXTS = [".py", ".go", ".ts"]


def session(seed: int, turns: int = 24) -> tuple[list[dict], list[str]]:
    """A generated coding session as OpenAI messages, and every specific it names."""
    rng = random.Random(seed)
    msgs, specifics = [], []
    for i in range(turns):
        path = f"{rng.choice(DIRS)}/{rng.choice(NAMES)}_{i}{rng.choice(EXTS)}"
        port = str(5400 + rng.randrange(100))
        ident = f"{rng.choice(NAMES)}Handler{i}"
        flag = f"--{rng.choice(NAMES).replace('_', '-')}-{i}"
        specifics += [path, ident, flag]
        msgs.append({"role": "user", "content": f"Now fix {ident} in {path} (step {i})."})
        call = {"command": f"go test ./... {flag}", "description": "run the tests"}
        msgs.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": f"c{i}", "type": "function", "function": {"name": "Bash", "arguments": json.dumps(call)}}
                ],
            }
        )
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"ok: listening on port {port}, {path}"})
        msgs.append({"role": "assistant", "content": f"Fixed {ident}; the server uses port {port}."})
    return msgs, specifics


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("rc") / "rc.db"
    with Lantern(path) as lt:
        for seed in range(3):
            msgs, _ = session(seed)
            lt.archive(msgs, session=f"s{seed}")
    return path


def test_the_block_restores_what_the_summary_dropped_and_nothing_it_states(store):
    msgs, specifics = session(0)
    stated = specifics[:30]  # the summary states the first ten turns' specifics
    summary = "This session is being continued. The user fixed: " + ", ".join(stated)
    with Lantern(store) as lt:
        rec = lt.recover_compaction(summary, live=msgs[-4:], session="s0", budget=4000)
        turns = {i: text for i, _, text in lt.store.session_turns("s0", lt.scope)}
    assert rec.text.startswith(TITLE) and rec.chars == len(rec.text) <= 4000 and rec.reason is None
    live = "\n".join(json.dumps(m) for m in msgs[-4:])
    packed = rec.loss.packed
    assert packed, "something was lost and something was packed"
    for item in packed:
        assert item.value not in summary and item.value not in live
        assert all(item.value in turns[seen.entry_id] for seen in item.seen)  # traceable to its entries
        if item.packed:
            assert item.value in rec.text
    lost_paths = [s for s in specifics[30:-3] if "/" in s]
    assert any(p in rec.text for p in lost_paths)
    assert {e.id for e in rec.entries} <= set(turns)


@given(st.integers(0, 2), st.integers(0, 9000), st.integers(0, 40))
@settings(max_examples=examples(40), deadline=None)
def test_the_block_never_exceeds_the_budget(store, seed, budget, stated):
    msgs, specifics = session(seed)
    with Lantern(store) as lt:
        rec = lt.recover_compaction(" ".join(specifics[:stated]), live=msgs[-4:], session=f"s{seed}", budget=budget)
    assert rec.chars == len(rec.text) <= budget
    assert (rec.text == "") == (rec.reason is not None)


def test_an_empty_summary_means_everything_not_live_is_lost(store):
    msgs, specifics = session(1)
    with Lantern(store) as lt:
        none = lt.recover_compaction(None, live=msgs[-4:], session="s1", budget=6000)
        empty = lt.recover_compaction("", live=msgs[-4:], session="s1", budget=6000)
    assert none.text == empty.text and none.loss.items
    values = {i.value for i in none.loss.items}
    assert specifics[0] in values and specifics[1] in values


@pytest.mark.parametrize(
    "case,reason",
    [("no-session", "nothing_archived"), ("all-live", "nothing_lost"), ("tiny-budget", "budget")],
)
def test_an_empty_block_says_why(store, case, reason):
    msgs, _ = session(2)
    with Lantern(store) as lt:
        if case == "no-session":
            rec = lt.recover_compaction("a summary", live=msgs[-4:], session="nobody", budget=4000)
        elif case == "all-live":
            rec = lt.recover_compaction("a summary", live=msgs, session="s2", budget=4000)
        else:
            rec = lt.recover_compaction("a summary", live=msgs[-4:], session="s2", budget=len(TITLE) + 3)
    assert rec.text == "" and rec.reason == reason and rec.to_json()["reason"] == reason


def test_a_huge_or_foreign_summary_gets_a_block(store):
    msgs, specifics = session(0)
    with Lantern(store) as lt:
        huge = lt.recover_compaction("x " * 100_000 + specifics[3], live=msgs[-4:], session="s0", budget=3000)
        chinese = lt.recover_compaction("之前修复了账单服务的端口问题。", live=msgs[-4:], session="s0", budget=3000)
        japanese = lt.recover_compaction(
            "以前に請求サービスを修正しました。", live=msgs[-4:], session="s0", budget=3000
        )
    assert specifics[3] not in {i.value for i in huge.loss.items}
    for rec in (huge, chinese, japanese):
        assert rec.text and rec.chars <= 3000


def test_bad_arguments_raise_clear_errors(store):
    with Lantern(store) as lt:
        with pytest.raises(TypeError):
            lt.recover_compaction(b"bytes", session="s0")
        with pytest.raises(ValueError):
            lt.recover_compaction("s", session="s0", budget=-1)
        with pytest.raises(TypeError):
            lt.recover_compaction("s", session="s0", live="not a list")


def test_json_keys_of_tool_calls_are_not_specifics():
    call = 'assistant -> tool call Bash({"command": "git log --oneline -5", "description": "recent commits"})'
    loss = find_loss([(1, 0, "user: show the log\n" + call)], "", "")
    values = {i.value for i in loss.items}
    assert "git log --oneline -5" in values
    assert "command" not in values and "description" not in values


WORDS = ["run", "the", "tests", "Reply", "to", "thread", "Commit", "and", "push", "Check", "status", "of", "build"]
FLAGS = ["--field a=1", "--jq .body", "-X POST", "--header 'Accept: x'", "--paginate", "-f body=ok"]


@given(st.data())
@settings(max_examples=examples(60), deadline=None)
def test_a_continued_command_line_gives_its_head_never_its_continuation_lines(data):
    """A backslash-newline continues a shell command (POSIX): the simple commands of a tool call are whole heads,
    never the flag lines that continue them, and no value spans lines."""
    head = data.draw(st.sampled_from(["gh api repos/o/r/pulls/7/comments", "curl -s https://x.test/a", "git log"]))
    flags = data.draw(st.lists(st.sampled_from(FLAGS), min_size=1, max_size=5))
    indent = data.draw(st.sampled_from(["", "  ", "\t"]))
    after = data.draw(st.sampled_from(["", " && git status", "\nls -la", " | head -5"]))
    line = head + "".join(f" \\\n{indent}{f}" for f in flags) + after
    got = commands(json.dumps({"command": line, "description": "post the reply"}))
    assert got[0] == head
    assert not any(c.startswith("-") or "\n" in c for c in got)
    assert all(c in line for c in got)


@given(st.lists(st.sampled_from(WORDS), min_size=2, max_size=8), st.sampled_from(["/", "_", "=", "--", ".x", "(", "`"]))
@settings(max_examples=examples(60), deadline=None)
def test_a_quoted_span_of_plain_words_weighs_less_than_the_same_span_holding_code(words, code):
    """A tool call's description, a to-do or a UI label (a quoted span of plain words) is rarely what the next turns
    use; the same span holding a character code is written with is a specific. Same place, same counts: the plain
    one weighs less."""
    plain = " ".join(words)
    coded = " ".join(words[:-1]) + " " + words[-1] + code + "v"
    call = json.dumps({"command": "make build", "description": plain, "note": coded})
    loss = find_loss([(1, 0, "user: go on\nassistant -> tool call Bash(" + call + ")")], "", "")
    weight = {i.value: i.weight for i in loss.items}
    assert weight[plain] < weight[coded]


@given(st.integers(60, 90), st.integers(3500, 6000))
@settings(max_examples=examples(30), deadline=None)
def test_an_archived_line_is_excerpted_once_however_many_items_it_holds(k, budget):
    """Newcomer finding: one long tool-call line holding several lost items came back two and three times under
    ``[Where the first of them were seen]``, each cut around another item. An archived line is shown once."""
    specifics = [f"/srv/apps/service-{i}/src/modules/handlers/handler_{i}_impl.ts" for i in range(k)]
    call = json.dumps({"command": "docker run -d " + " ".join(f"-v {p}:/m{i}" for i, p in enumerate(specifics))})
    loss = find_loss([(1, 0, f"user: start it\nassistant -> tool call Bash({call})")], "", "")
    text = pack_loss(loss, budget).text
    assume(VERBATIM not in text)  # the whole loss fit: nothing is excerpted
    excerpts = text.split(EXCERPTS, 1)[1].splitlines()[1:] if EXCERPTS in text else []
    assert sum(e.startswith("[turn 0 · Bash]") for e in excerpts) <= 1, text
    assert len(text) <= budget


def test_recording_stores_one_event_with_the_lost_entries(store, tmp_path):
    import shutil

    path = tmp_path / "copy.db"
    shutil.copy(store, path)
    msgs, _ = session(0)
    with Lantern(path) as lt:
        rec = lt.recover_compaction("summary", live=msgs[-4:], session="s0", budget=2000, record=True, source="test")
        (event,) = lt.events()
    assert event.source == "test" and event.session == "s0" and event.chars == rec.chars
    assert {e.id for e in rec.entries} <= set(event.lost)


def test_a_loss_that_fits_whole_comes_back_verbatim(tmp_path):
    msgs = [
        {"role": "user", "content": "Start postgres for the billing service."},
        {"role": "assistant", "content": "Started: docker run -p 5433:5432 postgres:16, listening on 5433."},
        {"role": "user", "content": "Now add a README section."},
        {"role": "assistant", "content": "Added a Deployment section."},
    ]
    with Lantern(tmp_path / "v.db") as lt:
        lt.archive(msgs, session="b")
        rec = lt.recover_compaction("The user set up the billing database.", live=msgs[-2:], session="b")
        small = lt.recover_compaction("The user set up the billing database.", live=msgs[-2:], session="b", budget=140)
    assert rec.text.startswith(VERBATIM) and msgs[1]["content"] in rec.text and msgs[3]["content"] not in rec.text
    assert small.text.startswith(TITLE) and "5433" in small.text and small.chars <= 140


def test_a_rerank_puts_the_items_the_llm_names_first_and_a_failure_keeps_the_weight_order(store):
    """Through a local server speaking the OpenAI API (tests/openai_fake.py): the named items go first; a 503 keeps
    the weight order and says why."""
    from openai_fake import FakeLLM, answer, status

    msgs, _ = session(0)
    with Lantern(store) as lt:
        plain = lt.recover_compaction("summary", live=msgs[-4:], session="s0", budget=4000)
        order = [i.value for i in plain.loss.items]
        with FakeLLM([answer('{"ids": [5, 2]}')]) as fake:
            ranked = lt.recover_compaction("summary", live=msgs[-4:], session="s0", rerank=True, llm=fake.settings())
            shown = fake.requests[0]["messages"][1]["content"]
        with FakeLLM([status(503)]) as fake:
            failed = lt.recover_compaction("summary", live=msgs[-4:], session="s0", rerank=True, llm=fake.settings())
    assert ranked.reranked and [i.value for i in ranked.loss.items[:2]] == [order[5], order[2]]
    assert order[0] in shown and ranked.rerank.usage.calls == 1
    assert not failed.reranked and "rerank skipped" in failed.rerank.warning
    assert [i.value for i in failed.loss.items] == order
