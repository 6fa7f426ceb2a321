"""A block's headers never say one value twice: a session archived under its own transcript name is not stored as
``X/X`` (archive/pipeline.py ``session_name``), and a header naming a session leaves out the time when the
session's name already shows it (recover/pack.py; aider names a session by the time it started). The demo printed
``session 2024-08-06 08:47:10/2024-08-06 08:47:10`` before."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples
from lantern import Lantern
from lantern.archive.chunk import chunk
from lantern.archive.parse import parse
from lantern.archive.pipeline import session_name
from lantern.demo import EXCERPT
from lantern.model import Entry
from lantern.recover.pack import TITLE, pack

STAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d")
_names = st.text(alphabet=st.sampled_from(list("ab/ -:0123456789")), min_size=1, max_size=20).filter(str.strip)


@settings(max_examples=examples(300), deadline=None)
@given(given_=_names, own=_names, same=st.sampled_from(["equal", "suffix", "other"]))
def test_a_session_name_never_repeats_the_transcripts_name(given_, own, same):
    if same == "equal":
        own = given_
    elif same == "suffix":
        given_ = f"{given_}/{own}"
    name = session_name(given_, own)
    if given_ == own or given_.endswith("/" + own):
        assert name == given_
    else:
        assert name == f"{given_}/{own}"
    assert session_name(given_, None) == given_ and session_name(None, own) == own


def _header_lines(block: str) -> list[str]:
    return [line for line in block.splitlines() if line.startswith("[") and line.endswith("]")]


def _check_headers(block: str) -> None:
    """No header line of ``block`` says a value twice: its parts differ, and no time is inside the session's name."""
    for line in _header_lines(block):
        if line.startswith(TITLE[:-1]):
            session = line.partition(", all from session ")[2][:-1]
            parts = session.split("/")
            assert all(a != b for a, b in zip(parts, parts[1:])), line
            continue
        parts = line[1:-1].split(" · ")
        assert len(parts) == len(set(parts)), line
        named = [p.removeprefix("session ") for p in parts if p.startswith("session ")]
        times = [p for p in parts if STAMP.fullmatch(p)]
        assert not (named and times and times[0] in named[0]), line


def _entry(i: int, session: str, time: datetime | None) -> Entry:
    text = f"turn {i} of {session}: the port is {5400 + i}. " * (1 + i % 4)
    return Entry(
        id=i,
        session=session,
        turn=i,
        text=text,
        summary=text[:100],
        tags=[],
        memory_type="episodic",
        importance=0.5,
        content_hash=str(i),
        time=time,
    )


@settings(max_examples=examples(200), deadline=None)
@given(
    specs=st.lists(
        st.tuples(
            st.integers(0, 3),  # which session
            st.one_of(st.just(0), st.integers(0, 3 * 24 * 60)),  # minutes after the session's start
            st.booleans(),  # whether the turn has a time
        ),
        min_size=1,
        max_size=12,
    ),
    named_by_time=st.lists(st.booleans(), min_size=4, max_size=4),
    group=st.booleans(),
    one_session=st.booleans(),
    budget=st.integers(200, 4000),
)
def test_no_packed_header_says_a_value_twice(specs, named_by_time, group, one_session, budget):
    start = datetime(2024, 8, 6, 8, 47, 10, tzinfo=timezone.utc)
    names = [start.strftime("%Y-%m-%d %H:%M:%S") if by_time else f"chat-{k}" for k, by_time in enumerate(named_by_time)]
    entries = [
        _entry(i + 1, names[0 if one_session else k], start + timedelta(minutes=m) if timed else None)
        for i, (k, m, timed) in enumerate(specs)
    ]
    res = pack(iter(entries), budget, ["port"], group=group, session=names[0] if one_session else None)
    assert len(res.text) <= budget
    _check_headers(res.text)


def test_the_demo_sessions_are_stored_under_their_own_names_and_recovered_without_repeats(tmp_path):
    """As the demo archives them: each aider session under its own name, which is its start time."""
    parsed = parse(EXCERPT, "aider")
    turns = list(chunk(parsed.messages, None))
    names = sorted({t.session for t in turns if t.session})
    assert names and all(STAMP.match(n) for n in names)
    with Lantern(tmp_path / "demo.db", embedder="minilm") as lt:
        for turn in turns:
            lt.archive(turn.messages, session=turn.session or "default")
        assert sorted(set(lt.store.sessions()) - {"default"}) == names
        for query, session in (("map tokens option test", None), ("map tokens option test", names[1])):
            block = lt.recover(query, session=session, min_score=0).text
            assert block and "/" not in "".join(_header_lines(block))
            _check_headers(block)
