"""The local and speaker signals (recover/local.py, recover/speaker.py) on real stores with the real embedder."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

import pytest

from lantern import Lantern
from lantern.config import Config
from lantern.model import Entry, Message
from lantern.recover import local, speaker
from lantern.recover.local import LOCAL
from lantern.recover.speaker import SPEAKER

BASE = Config()
WHEN = "2024-04-01T10:00:00+00:00"


def without(*names: str) -> Config:
    return replace(BASE, signals=tuple(s for s in BASE.signals if s not in names))


def said(*lines: tuple[str | None, str]) -> list[Message]:
    """(speaker name or None, text) -> one user message per turn."""
    return [Message(role="user", text=text, name=who, time=datetime.fromisoformat(WHEN)) for who, text in lines]


def find(lt: Lantern, fragment: str) -> int:
    return next(i for i, text in lt.store.db.execute("SELECT id, text FROM entries") if fragment in text)


# ---------------------------------------------------------------- speaker: pure parts
def test_speakers_of_reads_named_roles_only():
    assert speaker.speakers_of("user (Melanie): I went swimming.\nassistant (Bot Two): ok") == {"melanie", "bot two"}
    assert speaker.speakers_of("user: my boss is a chef\nassistant: noted") == set()
    assert speaker.speakers_of("I met user (Tim) yesterday") == set()  # not at a line start: not a speaker line


def test_named_in_matches_whole_words_case_insensitively():
    names = {"melanie", "tim", "bot two"}
    assert speaker.named_in("What activities does Melanie partake in?", names) == {"melanie"}
    assert speaker.named_in("What did timothy say?", names) == set()  # "tim" is not a word of it
    assert speaker.named_in("Did BOT  two answer Tim?", names) == {"bot two", "tim"}
    assert speaker.named_in("anything", set()) == set()


def test_speaker_ranking_keeps_the_fused_order_of_the_named_speakers_candidates():
    entries = {
        i: Entry(i, "s", i, "", f"user ({who}): t", [], "episodic", 0.5, str(i))
        for i, who in [(1, "Ann"), (2, "Bob"), (3, "Ann"), (4, "Bob")]
    }
    rankings = {"fulltext": [4, 3, 2, 1], "semantic": [3, 4, 1, 2]}  # RRF: 3 and 4 tie above 1 and 2
    assert speaker.speaker_ranking("What does Ann like?", rankings, entries, 60, None) == [3, 1]
    assert speaker.speaker_ranking("What does Bob like?", rankings, entries, 60, None) == [4, 2]
    assert speaker.speaker_ranking("What do they like?", rankings, entries, 60, None) == []


# ---------------------------------------------------------------- speaker: on a real store
TALK = said(
    ("Tim", "Hey Melanie, I started a new book club at work this month."),
    ("Melanie", "Nice! I'm off to go swimming with the kids now, talk soon."),
    ("Tim", "I went swimming too, and then to the hardware store for paint."),
    ("Melanie", "Yesterday I signed up for a pottery class, it's like therapy."),
    ("Tim", "I enjoy chess tournaments on weekends, a great hobby for me."),
    ("Melanie", "The kids and I painted a sunset together last weekend."),
)


@pytest.fixture()
def talk(tmp_path, built_db):
    """A handle on a copy of the database of ``TALK`` (session "chat"), built once per test process (conftest.py
    ``built_db``)."""
    with Lantern(built_db("local-speaker-talk", _build_talk, tmp_path / "talk.db")) as lt:
        yield lt


def _build_talk(path):
    with Lantern(path) as lt:
        lt.archive(TALK, session="chat")


def test_speaker_signal_lists_only_the_named_speakers_turns(talk):
    rec = talk.explain("What activities does Melanie do?", budget=6000)
    ranked = {c.entry.id: c for c in rec.candidates if SPEAKER in c.ranks}
    melanie = {find(talk, f) for f in ("swimming with the kids", "pottery class", "painted a sunset")}
    assert ranked and set(ranked) <= melanie  # Tim's turns never get a speaker rank
    tim_swim, mel_swim = find(talk, "I went swimming too"), find(talk, "swimming with the kids")
    by_id = {c.entry.id: c for c in rec.candidates}
    assert by_id[mel_swim].rrf > by_id[tim_swim].rrf  # both say "swimming": the named speaker's turn wins
    talk.config = without(SPEAKER)
    off = {c.entry.id: c for c in talk.explain("What activities does Melanie do?", budget=6000).candidates}
    assert all(SPEAKER not in c.ranks for c in off.values())
    assert off[mel_swim].rrf < by_id[mel_swim].rrf


def test_speaker_signal_is_silent_without_a_named_speaker(tmp_path):
    with Lantern(tmp_path / "plain.db") as lt:
        lt.archive(
            [
                Message(role="user", text="My boss Melanie is a chef."),
                Message(role="assistant", text="Noted: Melanie is a chef."),
            ],
            session="s",
        )
        rec = lt.explain("What does Melanie do?", budget=6000)
        assert rec.entries and all(SPEAKER not in c.ranks for c in rec.candidates)


# ---------------------------------------------------------------- local
def _filler(n: int, start: int) -> list[tuple[None, str]]:
    topics = ["the weather", "a bus ride", "lunch plans", "a movie", "the garden", "traffic", "a podcast", "coffee"]
    return [(None, f"Note {start + i}: chatting about {topics[(start + i) % len(topics)]}.") for i in range(n)]


# two stretches of one session, each saying what "my boss" does; only the first names the fintech forum
TRAJECTORIES = said(
    *_filler(3, 0),
    (None, "My boss works as a bank teller."),  # turn 3
    *_filler(2, 10),
    (None, "The fintech elite forum takes place in Beijing."),  # turn 6
    *_filler(12, 20),
    (None, "My boss works as a chef in a hotel."),  # turn 19
    *_filler(3, 40),
)


@pytest.fixture()
def traj(tmp_path, built_db):
    """A handle on a copy of the database of ``TRAJECTORIES`` (session "s"), built once per test process (conftest.py
    ``built_db``)."""
    with Lantern(built_db("local-speaker-traj", _build_traj, tmp_path / "traj.db")) as lt:
        yield lt


def _build_traj(path):
    with Lantern(path) as lt:
        lt.archive(TRAJECTORIES, session="s")


def test_window_rows_are_the_turns_within_width_of_each_seed(traj):
    traj.index.refresh()
    forum = find(traj, "fintech elite forum")
    rows = local.window_rows(traj.store, traj.index, traj.index.positions([forum]), 2)
    turns = sorted(traj.store.entries(traj.index.ids[rows].tolist(), text=False).values(), key=lambda e: e.turn)
    assert [e.turn for e in turns] == [4, 5, 6, 7, 8]
    assert (
        local.window_rows(traj.store, traj.index, traj.index.positions([forum]), 0).tolist()
        == traj.index.positions([forum]).tolist()
    )
    assert len(local.window_rows(traj.store, traj.index, [], 5)) == 0


def test_window_rows_stay_inside_the_seed_session(traj):
    traj.archive(said((None, "My boss works as a pilot.")), session="other")  # turn 0 of another session
    traj.index.refresh()
    first = traj.index.positions([find(traj, "Note 0:")])
    rows = local.window_rows(traj.store, traj.index, first, 3)
    sessions = {e.session for e in traj.store.entries(traj.index.ids[rows].tolist(), text=False).values()}
    assert sessions == {"s"} and len(rows) == 4
    pilot = traj.index.positions([find(traj, "pilot")])  # the only turn of its session: its window is itself
    assert local.window_rows(traj.store, traj.index, pilot, 8).tolist() == pilot.tolist()
    both = local.window_rows(traj.store, traj.index, [*pilot, *first], 3)
    assert sorted(traj.index.ids[both].tolist()) == sorted(traj.index.ids[[*rows, *pilot]].tolist())


def test_local_ranking_finds_the_generic_part_near_the_distinctive_hit(traj):
    traj.index.refresh()
    query = "What does my boss do for work? And where is the fintech elite forum?"
    near, far, forum = find(traj, "bank teller"), find(traj, "chef in a hotel"), find(traj, "fintech elite forum")
    vector = traj.queries.embed_query([query])[0]
    pos, cos = local.local_ranking(traj.store, traj.index, vector, traj.index.positions([forum]), None, 8)
    ranked = traj.index.ids[pos].tolist()
    assert len(ranked) == 15  # turns 0..14 around turn 6
    assert far not in ranked  # 13 turns away: outside the window
    assert ranked[:2] == [forum, near]  # of the 15 turns near the forum, the boss's job is the next best match
    assert list(cos) == sorted(cos, reverse=True)
    allowed = traj.index.ids != near
    pos, _ = local.local_ranking(traj.store, traj.index, vector, traj.index.positions([forum]), allowed, 8)
    assert near not in traj.index.ids[pos].tolist()
    assert len(local.local_ranking(traj.store, traj.index, None, [0], None, 8)[0]) == 0


def test_local_signal_is_fused_when_on_and_absent_when_off(traj):
    query = "What does my boss do for work? And where is the fintech elite forum?"
    rec = traj.explain(query, budget=6000)
    assert find(traj, "bank teller") in [e.id for e in rec.entries]
    assert any(LOCAL in c.ranks for c in rec.candidates)
    traj.config = without(LOCAL)
    assert all(LOCAL not in c.ranks for c in traj.explain(query, budget=6000).candidates)


def test_local_signal_never_adds_an_excluded_turn(traj):
    near = find(traj, "bank teller")
    rec = traj.explain("Where is the fintech elite forum?", budget=6000, exclude=[near])
    assert near not in {c.entry.id for c in rec.candidates}


def test_speaker_names_in_chinese_queries_and_one_letter_names():
    """A breaker's finding: a Chinese name inside a Chinese question (no spaces) never matched; "C++" matched any
    question with the word "c"."""
    from lantern.recover.speaker import named_in

    assert named_in("梅兰妮喜欢什么？", {"梅兰妮", "caroline"}) == {"梅兰妮"}
    assert named_in("what does c say about it", {"c++"}) == set()
    assert named_in("What did Caroline say?", {"caroline", "melanie"}) == {"caroline"}
    assert named_in("Did Carolines go?", {"caroline"}) == set()  # whole words for names in Latin script


def test_a_one_turn_session_that_every_query_signal_ranks_first_comes_first(tmp_path):
    """A newcomer's finding: in a small store of multi-turn sessions, the one-turn session holding the answer
    (semantic, full text and prf all rank it 1st) fused 7th: local and neighbour lifted the turns of the longer
    sessions, and a lone turn had no local rank."""
    with Lantern(tmp_path / "zh.db") as memory:
        memory.archive(
            [
                {"role": "user", "content": "把数据库端口设置为 5434，用户名是 ledger_admin。"},
                {"role": "assistant", "content": "好的，已经把数据库端口改为 5434，配置文件在 deploy/db.env。"},
                {"role": "user", "content": "日志目录是 /var/log/ledger，保留 14 天。"},
                {"role": "assistant", "content": "已设置日志目录为 /var/log/ledger，保留期 14 天。"},
                {"role": "user", "content": "接下来写一下部署文档。"},
                {"role": "assistant", "content": "部署文档写在 docs/deploy.md。"},
            ],
            session="zh",
        )
        memory.archive(
            [
                {"role": "user", "content": "The cache TTL is 900 seconds. Write it into config/cache.yaml."},
                {"role": "assistant", "content": "Done: config/cache.yaml now has ttl: 900."},
                {"role": "user", "content": "Now update the README."},
                {"role": "assistant", "content": "Added a Caching section to the README."},
            ],
            session="en",
        )
        answer = memory.archive(
            [
                {"role": "user", "content": "我们的测试服务器地址是 10.0.3.17，端口是 8443。"},
                {"role": "assistant", "content": "记住了：10.0.3.17:8443。"},
            ],
            session="zh-api",
        ).entry_ids[0]
        hits = memory.search("测试服务器的地址是什么？", k=3)
        assert hits[0].entry.id == answer, [(h.entry.id, h.ranks) for h in hits]
        assert "10.0.3.17" in memory.recover("测试服务器的地址是什么？", budget=500).text


def test_near_duplicate_turns_that_state_different_numbers_are_both_kept(tmp_path):
    with Lantern(tmp_path / "d.db", embedder="minilm") as memory:
        for port, session in ((5434, "a"), (5435, "b"), (5435, "c")):
            memory.archive([{"role": "user", "content": f"I changed the staging DB port to {port}."}], session=session)
        result = memory.explain("Which staging DB port did we use?", budget=3000)
        packed = [e.text for e in result.entries]
        assert any("5434" in t for t in packed) and any("5435" in t for t in packed)
        dupes = [c for c in result.candidates if c.verdict == "cut:duplicate"]
        assert len(dupes) == 1 and "5435" in dupes[0].entry.summary  # the same number again is a duplicate
