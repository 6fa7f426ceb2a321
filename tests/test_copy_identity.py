"""`lantern copy` (and import) keep a turn one entry per conversation and turn number, as the write path keeps it:
copying twice, copying after a source turn grew, and copying into a destination that holds some of the turns
already (the same ones, or its own under the same session name) never gives two rows for one (scope, session,
turn). Generated scenarios on the real stores: SQLite -> SQLite, SQLite -> PostgreSQL, PostgreSQL -> SQLite."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from lantern import Lantern
from lantern.api import copy_store

USERS = ["", "bob"]
SESSIONS = ["chat", "ops"]


def _turn(conv: tuple[str, str], i: int, reply: bool) -> list[dict[str, str]]:
    user, session = conv
    said = [{"role": "user", "content": f"{user or 'me'} in {session}, question {i}: which port for service {i}?"}]
    if reply:
        said.append({"role": "assistant", "content": f"Service {i} of {session} listens on port {7000 + i}."})
    return said


class Source:
    """A source store filled turn by turn: conversations (user, session) whose last turn may be open (the user
    message archived, the reply not yet), grown later as a live conversation grows."""

    def __init__(self, location, rng: random.Random):
        self.location, self.rng = location, rng
        self.replies: dict[tuple[str, str], list[bool]] = {}  # per conversation, per turn: its reply archived
        self.open: set[tuple[str, str]] = set()

    def write(self, new_turns: int) -> None:
        for conv in list(self.open):  # a turn archived before its reply: the reply comes now, the turn grows
            with Lantern(self.location, user=conv[0]) as lt:
                assert lt.archive(_turn(conv, len(self.replies[conv]) - 1, True), session=conv[1]).added == 1
            self.replies[conv][-1] = True
            self.open.discard(conv)
        for _ in range(new_turns):
            conv = (self.rng.choice(USERS), self.rng.choice(SESSIONS))
            said = self.replies.setdefault(conv, [])
            reply = self.rng.random() < 0.6
            with Lantern(self.location, user=conv[0]) as lt:
                lt.archive(_turn(conv, len(said), reply), session=conv[1])
            said.append(reply)
            if not reply:
                self.open.add(conv)
            else:
                self.open.discard(conv)


def _rows(location) -> list[tuple]:
    with Lantern(location) as lt:
        return [
            tuple(r) for r in lt.store.db.execute("SELECT user_id, agent_id, project, session, turn, text FROM entries")
        ]


def _check(src, dst, own: list[tuple]) -> None:
    """DST holds each source turn once, at one place of its conversation, and its own turns besides."""
    theirs, mine = _rows(src), _rows(dst)
    places = Counter(r[:5] for r in mine)
    assert [p for p, n in places.items() if n > 1] == []
    assert Counter(r[:4] + (r[5],) for r in mine) == Counter(r[:4] + (r[5],) for r in theirs + own)
    assert len(mine) == len(theirs) + len(own)


@pytest.mark.parametrize("direction", ["sqlite-sqlite", "sqlite-postgres", "postgres-sqlite"])
@pytest.mark.parametrize("seed", [1, 2])
def test_copy_twice_after_growth_and_into_a_store_holding_some_turns_stores_each_turn_once(
    direction, seed, tmp_path, request
):
    rng = random.Random(seed)
    ends = []
    for i, kind in enumerate(direction.split("-")):
        ends.append(tmp_path / f"{i}.db" if kind == "sqlite" else request.getfixturevalue("pg_url")())
    src, dst = ends
    source = Source(src, rng)
    source.write(rng.randint(3, 6))
    own: list[tuple] = []
    if rng.random() < 0.5 or seed == 1:  # DST already holds some of the same turns, archived there too
        conv = next(iter(source.replies))
        with Lantern(dst, user=conv[0]) as lt:
            lt.archive(_turn(conv, 0, source.replies[conv][0]), session=conv[1])
    if seed == 2:  # DST's own turns under a session name SRC uses: their turn numbers are taken
        with Lantern(dst) as lt:
            for i in range(2):
                text = f"dst's own note {i}: the build cache lives in /var/cache/build{i}"
                lt.archive([{"role": "user", "content": text}], session="chat")
                own.append(("", "", "", "chat", i, f"user: {text}"))

    first = copy_store(src, dst)
    assert first["entries"] == len(_rows(src))
    _check(src, dst, own)

    grew = len(source.open)  # the open turns grow, new ones come
    source.write(rng.randint(1, 4))
    second = copy_store(src, dst)
    assert second["entries"] == len(_rows(src))
    assert second["added"] + second["grown"] + second["duplicates"] == second["entries"]
    assert second["grown"] == grew
    _check(src, dst, own)

    third = copy_store(src, dst)  # nothing changed: everything is there
    assert (third["added"], third["grown"], third["duplicates"]) == (0, 0, third["entries"])
    _check(src, dst, own)


def test_a_copy_after_a_turn_grew_replaces_it_in_place_keeping_its_id(tmp_path, pg_url):
    """The turn an earlier copy stored before its reply came is replaced by the grown turn (its id, turn number
    and reinforcement state kept), on either backend, and found by its new words."""
    for dst in (tmp_path / "b.db", pg_url()):
        src = tmp_path / "a.db"
        src.unlink(missing_ok=True)
        with Lantern(src) as lt:
            lt.archive(_turn(("", "chat"), 0, False), session="chat")
        assert copy_store(src, dst)["added"] == 1
        with Lantern(dst) as lt:
            assert "7000" not in lt.recover("which port for service 0", budget=2000, min_score=0).text
            (before,) = lt.store.db.execute("SELECT id, turn, confidence FROM entries").fetchall()
        with Lantern(src) as lt:
            lt.archive(_turn(("", "chat"), 0, True), session="chat")
        assert copy_store(src, dst)["grown"] == 1
        with Lantern(dst) as lt:
            rows = lt.store.db.execute("SELECT id, turn, confidence, text FROM entries").fetchall()
            assert [tuple(r[:3]) for r in rows] == [tuple(before)]
            assert rows[0][3].endswith("listens on port 7000.")
            assert "7000" in lt.recover("which port for service 0", budget=2000, min_score=0).text


@pytest.mark.parametrize("direction", ["sqlite-sqlite", "sqlite-postgres"])
@pytest.mark.parametrize("seed", [3, 4, 5])
def test_a_turn_starting_with_an_earlier_turns_text_is_never_taken_for_its_growth(direction, seed, tmp_path, request):
    """Breaker finding: a destination holding its own turns under the source's session name, and a source turn whose
    text starts with an earlier turn's text and a new line ("yes" ... "yes\\nplease deploy billing"): the copy took
    the later turn for the growth of the earlier one, just appended, and overwrote it (a turn lost, verified all
    the same). Generated conversations full of such prefixes: every source turn is stored once, copying again
    changes nothing."""
    rng = random.Random(seed)
    src = tmp_path / "src.db"
    dst = tmp_path / "dst.db" if direction.endswith("sqlite") else request.getfixturevalue("pg_url")()
    own = []
    with Lantern(dst) as lt:
        for i in range(rng.randint(3, 7)):
            text = f"dst's own turn {i} about the cache"
            lt.archive([{"role": "user", "content": text}], session="s")
            own.append(("", "", "", "s", i, f"user: {text}"))
    said: list[str] = []
    with Lantern(src) as lt:
        for _ in range(rng.randint(4, 9)):
            if said and len(said) >= 2 and rng.random() < 0.6:  # starts with an earlier (not the last) turn's words
                content = rng.choice(said[:-1]) + "\n" + rng.choice(["please deploy billing", "and port 5433", "ok"])
            else:
                content = rng.choice(["yes", "hmm", "no", "go on", "why?"]) + f" {rng.randint(0, 3)}"
            if content in said:
                continue
            lt.archive([{"role": "user", "content": content}], session="s")
            said.append(content)
    first = copy_store(src, dst)
    assert first["entries"] == len(_rows(src)) and first["grown"] == 0
    _check(src, dst, own)
    again = copy_store(src, dst)
    assert (again["added"], again["grown"]) == (0, 0)
    _check(src, dst, own)
