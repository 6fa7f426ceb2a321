"""The deterministic stages of the write path: chunk -> summarize -> tag -> classify
(docs/architecture.md §2.3–2.6)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from budget import examples
from lantern.archive.chunk import chunk
from lantern.archive.classify import classify
from lantern.archive.summarize import summarize
from lantern.model import Message, Tag, ToolCall, ToolResult, Turn
from lantern.text.cjk import cjk_bigrams
from lantern.text.tags import STOPWORDS, extract_paths, extract_tags, hint_terms, query_terms


def _data_dir() -> Path:
    env = os.environ.get("LANTERN_DATA")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "shared" / "data"  # ../shared/data beside the repo


AIDER = _data_dir() / "aider_chat_history" / "chat-history.md"


def tagmap(text: str) -> dict[str, str]:
    return {t.value: t.kind for t in extract_tags(text)}


def coding_turn() -> list[Message]:
    return [
        Message("user", "The app can't reach the database since I bumped to v2.3.1, see src/app/db.py"),
        Message(
            "assistant",
            "Let me check the connection.",
            tool_calls=[ToolCall("bash", '{"command": "psql -h localhost -p 5433 -d app"}', id="c1")],
        ),
        Message(
            "tool",
            tool_results=[
                ToolResult(
                    'psql: connection to server at "localhost" (127.0.0.1), port 5433 failed: Connection refused',
                    call_id="c1",
                    name="bash",
                )
            ],
        ),
        Message(
            "assistant",
            "Commit a1b2c3d removed the driver, so the import raises ModuleNotFoundError. "
            "The fix is in https://github.com/acme/app/pull/42 and the server must listen on port 5433.",
            tool_calls=[ToolCall("edit", '{"path": "src/app/db.py", "new": "import psycopg"}')],
        ),
    ]


# ----------------------------------------------------------------------------------------------------- chunk
def test_chunk_tool_calls_and_results_stay_in_their_user_turn():
    msgs = coding_turn() + [Message("user", "thanks, and the tests?"), Message("assistant", "All green.")]
    turns = chunk(msgs, "s1")
    assert [len(t.messages) for t in turns] == [4, 2]
    assert [t.index for t in turns] == [0, 1]
    first = turns[0]
    assert first.messages[0].role == "user" and first.messages[2].role == "tool"
    assert first.tool_names == ["bash", "edit"]
    assert first.session == "s1"
    assert first.files == ["src/app/db.py"]  # found in the text and in the edit arguments, once


def test_chunk_user_message_holding_only_tool_results_continues_the_turn():
    """Anthropic / Claude Code return tool results in role-user messages: they are not a new question."""
    msgs = [
        Message("user", "list the files"),
        Message("assistant", tool_calls=[ToolCall("ls", "{}", id="t1")]),
        Message("user", tool_results=[ToolResult("README.md\nsetup.py", call_id="t1")]),
        Message("assistant", "There are two files."),
        Message("user", "ok"),
    ]
    turns = chunk(msgs)
    assert [len(t.messages) for t in turns] == [4, 1]
    assert turns[0].files == ["README.md", "setup.py"]


def test_chunk_session_change_splits_and_carries_the_session():
    msgs = [
        Message("user", "hi", session="a"),
        Message("assistant", "hello", session="a"),
        Message("assistant", "new session greeting", session="b"),
        Message("user", "q", session="b"),
        Message("user", "q2"),  # no session: the argument's
    ]
    turns = chunk(msgs, "default")
    assert [(t.session, [m.text for m in t.messages]) for t in turns] == [
        ("a", ["hi", "hello"]),
        ("b", ["new session greeting"]),
        ("b", ["q"]),
        ("default", ["q2"]),
    ]
    assert [t.index for t in turns] == [0, 1, 2, 3]


def test_chunk_leading_assistant_message_is_a_turn():
    turns = chunk([Message("assistant", "How can I help?"), Message("user", "fix it"), Message("assistant", "done")])
    assert [[m.role for m in t.messages] for t in turns] == [["assistant"], ["user", "assistant"]]


def test_chunk_system_messages_form_their_own_turn():
    msgs = [
        Message("system", "You are a coding assistant."),
        Message("system", "Project: lantern."),
        Message("assistant", "Ready."),
        Message("user", "go"),
        Message("assistant", "ok"),
        Message("system", "Context compacted."),
        Message("user", "next"),
    ]
    turns = chunk(msgs)
    assert [[m.role for m in t.messages] for t in turns] == [
        ["system", "system"],
        ["assistant"],
        ["user", "assistant"],
        ["system"],
        ["user"],
    ]


def test_chunk_files_keep_message_files_then_found_paths_unique_in_order():
    msgs = [
        Message("user", "compare ./b.sh with docs/a.md", files=["z.py", "docs/a.md"]),
        Message("assistant", "see https://example.com/x.py and ~/.bashrc", tool_results=[ToolResult("cat z.py")]),
    ]
    (turn,) = chunk(msgs)
    assert turn.files == ["z.py", "docs/a.md", "./b.sh", "~/.bashrc"]  # the URL's path is not a file


def test_chunk_empty():
    assert chunk([]) == []


# ------------------------------------------------------------------------------------------------- summarize
def test_summary_cuts_each_message_to_500_at_a_boundary():
    long = " ".join(f"Sentence number {i} talks about the database." for i in range(60))
    turn = Turn([Message("user", long), Message("assistant", "short answer")])
    s = summarize(turn)
    first = s.split("\n")[0]
    assert first.startswith("user: ")
    assert len(first[len("user: ") :]) <= 500
    assert first.endswith("database.…")  # cut after a sentence
    assert "assistant: short answer" in s


def test_summary_cuts_at_a_word_when_no_sentence_end():
    words = " ".join(["alpha"] * 200)
    s = summarize(Turn([Message("user", words)]))
    body = s[len("user: ") :]
    assert len(body) <= 500 and body.endswith("alpha…")


def test_summary_chinese_counts_characters():
    text = "数据库的端口是五四三三，" * 100  # 1,200 characters
    s = summarize(Turn([Message("user", text)]))
    body = s[len("user: ") :]
    assert len(body) <= 500 and body.endswith("…")
    assert body.endswith("，…")  # cut after a CJK comma


def test_summary_total_cap_keeps_tools_and_files():
    msgs = [Message("user", "x " * 400)] + [Message("assistant", f"step {i} " + "y " * 300) for i in range(6)]
    msgs[1].tool_calls.append(ToolCall("bash", "ls"))
    turn = Turn(msgs, files=["a.py", "b/c.md"])
    s = summarize(turn)
    assert len(s) <= 1200
    lines = s.split("\n")
    assert lines[-2] == "tools: bash"
    assert lines[-1] == "files: a.py, b/c.md"
    assert lines[0].startswith("user: ")  # the user's message comes first and is kept


def test_summary_lists_tool_names_and_files_and_tool_heads_only_if_room():
    turn = chunk(coding_turn(), "s")[0]
    s = summarize(turn)
    assert "tools: bash, edit" in s
    assert "files: src/app/db.py" in s
    assert "result bash: psql: connection to server" in s  # room left: the head of the tool result
    tight = summarize(turn, message_chars=500, max_chars=300)
    assert len(tight) <= 300
    assert "result bash" not in tight and "tools: bash, edit" in tight


def test_summary_is_deterministic():
    a = summarize(chunk(coding_turn(), "s")[0])
    b = summarize(chunk(coding_turn(), "s")[0])
    assert a == b


def test_summary_names_speaker_and_many_files_are_counted():
    files = [f"pkg/module_{i}.py" for i in range(100)]
    turn = Turn([Message("user", "I went hiking.", name="Caroline")], files=files)
    s = summarize(turn)
    assert s.startswith("user (Caroline): I went hiking.")
    files_line = s.split("\n")[-1]
    assert files_line.startswith("files: pkg/module_0.py") and re.search(r"\(\+\d+ more\)$", files_line)
    assert len(files_line) <= 1200 // 4


@settings(max_examples=examples(150), deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["user", "assistant", "system", "tool"]),
            st.text(alphabet=st.characters(codec="utf-8"), max_size=1500),
            st.lists(st.text(min_size=1, max_size=30), max_size=3),
        ),
        max_size=8,
    ),
    st.integers(min_value=20, max_value=800),
    st.integers(min_value=1, max_value=2000),
)
def test_summary_caps_hold_for_any_input(msgs, message_chars, max_chars):
    turn = Turn(
        [Message(role, text, tool_calls=[ToolCall(n, text[:50]) for n in names]) for role, text, names in msgs],
        files=[n for _r, _t, names in msgs for n in names],
    )
    s = summarize(turn, message_chars, max_chars)
    assert len(s) <= max_chars
    assert s == summarize(turn, message_chars, max_chars)
    for line in s.split("\n"):
        if line.startswith(("user: ", "assistant: ", "system: ")):
            assert len(line.split(": ", 1)[1]) <= message_chars


# ------------------------------------------------------------------------------------------------------ tags
def test_tags_on_a_realistic_coding_turn():
    turn = chunk(coding_turn(), "s")[0]
    tags = tagmap(turn.text)
    assert tags["src/app/db.py"] == "path"
    assert tags["v2.3.1"] == "version"
    assert tags["a1b2c3d"] == "hash"
    assert tags["ModuleNotFoundError"] == "error"
    assert tags["5433"] == "port"
    assert tags["127.0.0.1"] == "url"
    assert tags["https://github.com/acme/app/pull/42"] == "url"
    assert tags["localhost"] == "quoted"
    values = [t.value for t in extract_tags(turn.text)]
    assert len(values) == len(set(values))  # unique
    assert values.index("v2.3.1") < values.index("src/app/db.py") < values.index("a1b2c3d")  # first appearance


@pytest.mark.parametrize(
    "text, value, kind",
    [
        ("edit src/db/config.py now", "src/db/config.py", "path"),
        ("run ./x.sh", "./x.sh", "path"),
        (r"open C:\x\y.txt", r"C:\x\y.txt", "path"),
        ("in ~/.bashrc", "~/.bashrc", "path"),
        ("see foo.py.", "foo.py", "path"),
        ("/usr/local/bin is on PATH", "/usr/local/bin", "path"),
        ("aider/repomap.py:22:1: E402 module level import", "aider/repomap.py", "path"),
        ("aider/repomap.py:22:1: E402 module level import", "E402", "error"),
        ("cp .env.example .env", ".env", "path"),
        ("edit docker/Dockerfile", "docker/Dockerfile", "path"),
        ("error[E0425]: cannot find value", "E0425", "error"),
        ("net::ERR_CONNECTION_REFUSED", "ERR_CONNECTION_REFUSED", "error"),
        ("raise ValueError(msg)", "ValueError", "error"),
        ("got HTTP 404 from the API", "HTTP 404", "error"),
        ("killed, exit code 137", "exit code 137", "error"),
        ("connect ECONNREFUSED", "ECONNREFUSED", "error"),
        ("openai.APIConnectionError was raised", "APIConnectionError", "error"),
        ("call run_install() first", "run_install", "identifier"),
        ("the getUserName helper", "getUserName", "identifier"),
        ("class RepoMap does it", "RepoMap", "identifier"),
        ("import aider.coders.base_coder", "aider.coders.base_coder", "identifier"),
        ("then `main()` exits", "main", "identifier"),
        ("set DATABASE_URL first", "DATABASE_URL", "identifier"),
        ("echo $HOME", "HOME", "identifier"),
        ("pass --no-auto-commits", "--no-auto-commits", "identifier"),
        ("switch to gpt-4o-mini", "gpt-4o-mini", "identifier"),
        ("the db listens on port 5433", "5433", "port"),
        ("port: 8080", "8080", "port"),
        ("PGPORT=5433 psql", "5433", "port"),
        ("open localhost:8080 in a browser", "8080", "port"),
        ("listen on :5433", "5433", "port"),
        ("postgres://u:pw@db.example.com:5432/app", "5432", "port"),
        ("postgres://u:pw@db.example.com:5432/app", "postgres://u:pw@db.example.com:5432/app", "url"),
        ("docs at www.example.org/x.", "www.example.org/x", "url"),
        ("mail ops@example.com", "ops@example.com", "url"),
        ("release v1.2.3 today", "v1.2.3", "version"),
        ("Python 3.11.7 installed", "3.11.7", "version"),
        ("pin numpy==2.0.1", "2.0.1", "version"),
        ("needs Python 3.11", "3.11", "version"),
        ("at commit 1f3e5a7b9c", "1f3e5a7b9c", "hash"),
        ("sha " + "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", None, "hash"),
        ("p95 is 250ms", "250ms", "number"),
        ("it uses 1.5 GB", "1.5 GB", "number"),
        ("wait 30s", "30s", "number"),
        ("at 80% load", "80%", "number"),
        ("about 10k tokens", "10k", "number"),
        ("cost $0.04", "$0.04", "number"),
        ("we indexed 300 files", "300 files", "number"),
        ("shipped 2024-08-05", "2024-08-05", "date"),
        ("met at 1:56 pm on 8 May, 2023", "8 May, 2023", "date"),
        ("met at 1:56 pm on 8 May, 2023", "1:56 pm", "date"),
        ("due 14 Mar", "14 Mar", "date"),
        ("due May 8, 2023", "May 8, 2023", "date"),
        ('the table "user_sessions_v2"', "user_sessions_v2", "identifier"),
        ('titled "The Name of the Wind"', "The Name of the Wind", "quoted"),
        ("the `cache` flag", "cache", "quoted"),
        ("it's 'ready' now", "ready", "quoted"),
    ],
)
def test_tag_forms(text, value, kind):
    tags = tagmap(text)
    if value is None:
        assert kind in tags.values()
    else:
        assert tags.get(value) == kind, tags


PROSE = [
    "The quick brown fox jumps over the lazy dog. However, we went to the store and bought some apples.",
    "It was 3 a.m. when I finally finished the report, e.g. the part about costs, i.e. the boring bits.",
    "I don't think it's ready yet, and/or we should wait. My sister's friends visited us in the summer.",
    "Report 2023 was great; I support 10 teams and read 2 books. Honestly, that's all I remember.",
    "Caroline said she went to a support group yesterday and it was so powerful. Melanie painted a lake.",
    "We talked about TCP/IP, the I/O of the system, input/output ports and the client/server model.",
    "Sure! Here is what I would do first: read the docs, then ask. Thanks a lot, see you later.",
    "My name is Anna. I live in Berlin and I love hiking, reading novels and cooking pasta at home.",
]


@pytest.mark.parametrize("text", PROSE)
def test_no_tags_in_plain_english_prose(text):
    assert extract_tags(text) == []


def test_chinese_ports_dates_numbers_and_quotes():
    tags = tagmap("数据库端口是5433，另一个端口 8080，名字是“小明”，2023年5月8日开会，花了5秒，等了3个月")
    assert tags["5433"] == "port"
    assert tags["8080"] == "port"
    assert tags["小明"] == "quoted"
    assert tags["2023年5月8日"] == "date"
    assert tags["5秒"] == "number"
    assert tags["3个月"] == "number"
    assert extract_tags("我们今天去公园散步，天气很好。") == []


def test_cjk_bigrams():
    assert cjk_bigrams("数据库端口是5433") == "数据 据库 库端 端口 口是 5433"
    assert cjk_bigrams("端口") == "端口"
    assert cjk_bigrams("我") == "我"
    assert cjk_bigrams("use 端口 8080") == "use 端口 8080"
    assert cjk_bigrams("a我b") == "a 我 b"
    assert cjk_bigrams("你好，世界") == "你好 ， 世界"
    assert cjk_bigrams("ポート番号") == "ポー ート ト番 番号"
    assert cjk_bigrams("포트번호") == "포트 트번 번호"
    assert cjk_bigrams("plain English, unchanged.") == "plain English, unchanged."
    assert cjk_bigrams("") == ""


def test_hint_terms_normalization():
    tags = [
        Tag("path", "src/app/db.py"),
        Tag("port", "5433"),
        Tag("version", "v2.3.1"),
        Tag("number", "1.5 GB"),
        Tag("identifier", "getUserName"),
        Tag("hash", "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b"),
        Tag("url", "https://github.com/acme/app"),
        Tag("quoted", "数据库"),
    ]
    terms = hint_terms(tags, extra=["str_replace_editor", "bash"])
    for t in [
        "src/app/db.py", "db.py", "db", "5433", "port", "端口", "v2.3.1", "2.3.1", "1.5gb", "getusername",
        "user", "name", "9f86d08", "github.com", "数据", "据库", "str_replace_editor", "replace", "editor", "bash",
    ]:  # fmt: skip
        assert t in terms, t
    assert len(terms) == len(set(terms))
    assert all(t == t.lower() for t in terms)


def test_query_terms_share_the_normalization_and_overlap_with_hints():
    q = "Which port did the database use in src/app/db.py? 数据库端口是多少"
    terms = query_terms(q)
    assert terms[:3] == ["src/app/db.py", "db.py", "db"]  # tag terms first
    assert "port" in terms and "database" in terms
    assert "which" not in terms and "the" not in terms and "did" not in terms
    assert "src" not in terms  # words inside a tag come in through the tag only
    for bigram in ["数据", "据库", "库端", "端口", "口是"]:
        assert bigram in terms
    assert set(hint_terms(extract_tags(q))) <= set(terms)

    turn = chunk(coding_turn(), "s")[0]
    hints = set(hint_terms(extract_tags(turn.text), turn.tool_names))
    overlap = hints & set(terms)
    assert {"src/app/db.py", "db.py", "port", "端口"} <= overlap
    unrelated = set(query_terms("what did Caroline paint last summer?"))
    assert not (hints & unrelated)


_TAGGY = st.sampled_from(
    ["port 5433", "src/a.py", "v1.2.3", "a1b2c3d", "`x_y`", '"q q"', "http://h:80/p", "端口", "数据库", "E0425",
     "1.5 GB", "May 8, 2023", ":", "/", ".", "..", "=", "$", "()", "${", "-", "@", "~", "\\", "\n", " ", "'"]
)  # fmt: skip


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.one_of(_TAGGY, st.text(max_size=30)), max_size=40).map("".join))
@example("src/a.py:()")  # found by CI: extract_paths took the "(" after the trailing ":" for a call
@example("@.port 5433")  # found by a breaker: extract_paths skipped a mentioned dotfile extract_tags keeps
def test_tags_never_fail_and_values_come_from_the_text(text):
    tags = extract_tags(text)
    values = [t.value for t in tags]
    assert len(values) == len(set(values))
    for t in tags:
        assert t.value and t.value in text
        assert t.kind in {"url", "path", "error", "date", "hash", "version", "port", "number", "identifier", "quoted"}
    # extract_tags may lose a path to a number or date with a unit claimed just before it ("1.5 GB-x/a.py");
    # on real text the two agree exactly (test_aider_tags_find_paths_and_no_common_words)
    assert {t.value for t in tags if t.kind == "path"} <= set(extract_paths(text))
    terms = query_terms(text)
    assert len(terms) == len(set(terms)) and all(terms)
    if not re.search(
        "[\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002ebef]", text
    ):
        assert cjk_bigrams(text) == text


def test_stopwords_are_lowercase_words():
    assert all(w == w.lower() and " " not in w for w in STOPWORDS)


def test_extract_paths_matches_the_path_tags():
    text = chunk(coding_turn(), "s")[0].text + " cp ./a.sh /etc/x.conf; https://x.org/y.py docker/Dockerfile"
    assert extract_paths(text) == [t.value for t in extract_tags(text) if t.kind == "path"]


# -------------------------------------------------------------------------------------------------- classify
@pytest.mark.parametrize(
    "messages, memory_type, prior",
    [
        ([Message("system", "You are a helpful assistant.")], "episodic", 1.0),
        ([Message("user", "We decided to use PostgreSQL, never MongoDB.")], "semantic", 0.8),
        ([Message("user", "I prefer tabs. Don't use spaces.")], "semantic", 0.8),
        ([Message("user", "My name is Anna and I live in Berlin.")], "semantic", 0.8),
        ([Message("user", "The port is 5433.")], "semantic", 0.8),
        ([Message("user", "We decided that the port is 5433.")], "semantic", 0.85),
        ([Message("user", "我们决定用PostgreSQL，不要用MongoDB。")], "semantic", 0.8),
        ([Message("user", "我的名字是小明，地址是北京。")], "semantic", 0.8),
        ([Message("user", "我们决定了，数据库端口是5433。")], "semantic", 0.85),
        (
            [Message("user", "How do I deploy?"), Message("assistant", "1. Build the image\n2. Push it\n3. Restart")],
            "procedural",
            0.6,
        ),
        ([Message("assistant", "First install the deps, then run `make test`.")], "procedural", 0.6),
        ([Message("user", "部署的步骤是什么？"), Message("assistant", "先构建镜像，然后推送。")], "procedural", 0.6),
        ([Message("user", "I went to the beach yesterday with my kids.")], "episodic", 0.5),
        (
            [
                Message("user", "run it"),
                Message("assistant", tool_calls=[ToolCall("bash", "pytest -q")]),
                Message("tool", tool_results=[ToolResult("." * 2000 + " 120 passed in 3.2s")]),
            ],
            "episodic",
            0.3,
        ),
    ],
)
def test_classify_cues(messages, memory_type, prior):
    assert classify(Turn(messages)) == (memory_type, prior)


def test_classify_ignores_cues_inside_tool_output():
    turn = Turn(
        [
            Message("user", "run the tests"),
            Message("tool", tool_results=[ToolResult("TypeError: argument must be str, never int. " * 20)]),
        ]
    )
    assert classify(turn) == ("episodic", 0.3)


def test_classify_prior_in_range_and_empty_turn():
    assert classify(Turn([])) == ("episodic", 0.5)
    assert classify(Turn([Message("assistant", "")])) == ("episodic", 0.5)


# --------------------------------------------------------------------------------------- real data (aider)
def aider_turns(limit: int = 200) -> list[list[Message]]:
    """Crude split of aider's chat log: a block of "#### " lines is the user message; "> " lines are tool output
    (aider's own), the rest the assistant's answer. The real parser lives in archive/parse (not used here)."""
    turns: list[list[Message]] = []
    user: list[str] = []
    assistant: list[str] = []
    tool: list[str] = []
    in_user = False

    def flush() -> None:
        if not user:
            return
        msgs = [Message("user", "\n".join(user))]
        if assistant or tool:
            reply = Message("assistant", "\n".join(assistant).strip())
            if tool:
                reply.tool_results.append(ToolResult("\n".join(tool), name="aider"))
            msgs.append(reply)
        turns.append(msgs)

    with AIDER.open(encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("#### "):
                if not in_user:
                    flush()
                    user, assistant, tool = [], [], []
                    in_user = True
                user.append(line[5:].rstrip())
                continue
            in_user = False
            if line.startswith(">"):
                tool.append(line[1:].strip())
            elif not line.startswith("# aider chat started"):
                assistant.append(line.rstrip())
            if len(turns) >= limit:
                break
    flush()
    return turns[:limit]


COMMON_WORDS = set(
    """the be to of and a in that have it for not on with he as you do at this but his by from they we say her
    she or an will my one all would there their what so up out if about who get which go me when make can like
    time no just him know take people into year your good some could them see other than then now look only come
    its over think also back after use two how our work first well way even new want because any these give day
    most us is are was were been has had did does said code file function test change add error line fix need
    should here let help run update remove show files""".split()
)

needs_aider = pytest.mark.skipif(not AIDER.exists(), reason=f"{AIDER} not present")


@needs_aider
def test_aider_tags_find_paths_and_no_common_words():
    turns = [chunk(msgs, "aider")[0] for msgs in aider_turns(200)]
    assert len(turns) == 200
    found: dict[str, str] = {}
    for turn in turns:
        for tag in extract_tags(turn.text):
            found.setdefault(tag.value, tag.kind)
    for path in ["aider/coders/base_coder.py", "aider/repomap.py", "aider/commands.py", "aider/io.py"]:
        assert found.get(path) == "path", path
    assert any(k == "hash" for k in found.values())  # "> Commit d0ffbf1 ..."
    junk = sorted(v for v, k in found.items() if k != "quoted" and v.lower() in COMMON_WORDS)
    assert junk == []
    files = {f for t in turns for f in t.files}
    assert "aider/coders/base_coder.py" in files
    for turn in turns:
        assert extract_paths(turn.text) == [t.value for t in extract_tags(turn.text) if t.kind == "path"]


@needs_aider
def test_aider_write_stages_hold_their_bounds_on_real_turns():
    """chunk + summarize + tags (+ hint terms) + classify on 200 real aider turns: every summary within its cap,
    hints unique and non-empty, every turn classified. Their speed is measured by benchmarks/bench_archive.py
    (BENCHMARKS.md §1), not here: a timed test fails on a loaded machine."""
    raw = aider_turns(200)
    seen = 0
    for msgs in raw:
        for turn in chunk(msgs, "aider"):
            summary = summarize(turn)
            hints = hint_terms(extract_tags(turn.text), turn.tool_names)
            memory_type, prior = classify(turn)
            assert len(summary) <= 1200 and summary.strip()
            assert len(hints) == len(set(hints)) and all(hints)
            assert memory_type in ("episodic", "semantic", "procedural") and 0.0 <= prior <= 1.0
            seen += 1
    assert seen >= 200


def test_extract_paths_is_linear_in_the_paths_it_finds():
    """CPU time at 8x the distinct paths stays far below 64x (a list's membership test per path made it quadratic: a
    5 MB tool output of 80,000 paths took minutes to archive, and as much in a recovery's live context)."""
    import time

    def run(n: int) -> tuple[float, list[str]]:
        text = " ".join(f"src/pkg{i}/mod_{i}.py" for i in range(n))
        started = time.process_time()
        paths = extract_paths(text)
        return time.process_time() - started, paths

    run(1000)
    (small, few), (large, many) = min(run(10_000) for _ in range(2)), min(run(80_000) for _ in range(2))
    assert len(few) == 10_000 and many[-1] == "src/pkg79999/mod_79999.py" and len(set(many)) == len(many) == 80_000
    assert large < 24 * small + 0.05, (small, large)  # best of two each: linear 8x, the quadratic scan 64x
