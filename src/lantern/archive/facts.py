"""Fact extraction by pattern (docs/architecture.md §2.7, §5.4), English and Chinese.

A turn's messages yield ``ExtractedFact(key, value, key_text, replaces)`` records. Each pattern family is one small
pure function over one sentence; ``extract_facts(texts)`` runs them all. The families (ours; the write-ups only
name examples):

=====================  =================================================  ==========================================
family                 example                                            fact
=====================  =================================================  ==========================================
``is``                 "the staging DB port is 5433"                      staging db port = 5433
``set``                "set the port to 5434", "changed X to Y"           port = 5434
``assign``             "DB_PORT=5433", "port = 5433"                      db port = 5433
``colon``              "port: 5433" in config-like lines                  port = 5433
``switch``             "switched the database from MongoDB to Postgres"   database = Postgres (MongoDB replaced)
``retract``            "we no longer use Redis"                           Redis retracted (value None)
``zh_set``             "端口改为 5434", "数据库的端口是 5433"              端口 = 5434
``zh_switch``          "从 MySQL 换成 PostgreSQL"                          PostgreSQL replaces MySQL
``zh_retract``         "不再用 Redis"                                      Redis retracted
=====================  =================================================  ==========================================

What is NOT extracted (precision over recall: a false fact would mark a true one "superseded"):

- questions (a sentence ending in ``?``/``？``), URLs (masked before matching: ``?port=5433`` is not a fact);
- "the X is Y" when Y is a plain lowercase word ("the server is running"): Y must look like a value — it holds a
  digit, one of ``. _ / : @ -``, an uppercase letter, or is quoted/backticked; likewise "X是Y" needs a value-like Y
  or an attribute key with 的 ("我的名字是张三"), so "我是学生" is not a fact;
- "X: Y" in prose ("Note: this matters"): a colon line counts only when Y is one token and the line is config-like
  (the key has ``_``/``.``/a digit, or the line sits in a run of at least two ``key: value`` lines);
- ``a == b``, ``x <= y``, keyword arguments inside a call (``f(port=1)``), an assignment whose statement goes on
  (``answer = await ask()``), ``self.x = y``; values with spaces or longer than 80 characters; keys with a pronoun
  or auxiliary ("set it to 5", "set up the mock to raise"); a plain-word value of "set X to Y" that does not end
  the clause;
- program variables: in fenced code blocks and in tool results (``extract_facts(texts, code)``) only settings
  count — ``ENV_STYLE=value`` and config-like ``key: value`` runs — so ``x = 1`` in a diff is not a fact.

**Keys** are matched exactly after normalization (``normalize_key``): case folded, leading the/a/an/our/my/your and
我的/你的/我们的 dropped, 的 removed, ``_ . -`` and whitespace runs made one space, spaces next to CJK removed.
So "The DB_Port" = "db port" = "DB port", but "database port" ≠ "DB port": there is no synonym or embedding match
(ours; a fuzzy match would supersede facts about different things). A key that is only an attribute word
(``GENERIC_KEYS``: port, host, version, 端口, 地址, 版本...) takes the topic a named thing in the clause before it
gives: "数据库用 PostgreSQL，端口是 5433" -> 数据库端口, "For the gateway, the port is 9443" -> gateway port,
"The database host is db.internal, the port is 5433" -> database port, so two services' ports are two keys;
with no named thing there ("好的，端口改为 5434", "No, the port is 5434") it stays bare. "X is Y" without a
determiner counts only when X ends in such a word ("Noted, redis port is 6380").
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from lantern import lazy_re
from lantern.model import ExtractedFact
from lantern.text.fact_keys import DETERMINER_WORDS, DETERMINERS, IDEOGRAPHS, LEAD_EN, normalize_key, normalize_value

__all__ = ["ExtractedFact", "extract_facts", "fact_texts", "normalize_key", "normalize_value", "sentences"]

MAX_VALUE_CHARS = 80  # longer "values" are prose, not facts (ours)
MAX_KEY_WORDS = 5  # English keys: at most this many words (ours)
MAX_ZH_KEY_CHARS = 24  # Chinese keys: at most this many characters (ours)
MAX_TEXT_CHARS = 4_000  # each message is scanned up to this many characters (ours: bounds the per-turn cost)


# ----------------------------------------------------------------------------------------------- sentences
_URL = lazy_re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://\S+|\bwww\.\S+")
_SENTENCE_END = lazy_re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'`(\[])|(?<=[。！？；;])|\n")


def sentences(text: str) -> list[str]:
    """``text`` (first 4,000 characters) with URLs blanked, split into lines and sentences; questions dropped."""
    text = text[:MAX_TEXT_CHARS]
    if "://" in text or "www." in text:
        text = _URL.sub(" ", text)
    out = []
    for s in _SENTENCE_END.split(text):
        s = s.strip()
        if s and not s.rstrip("\"')]”」 ").endswith(("?", "？")):
            out.append(s)
    return out


# ----------------------------------------------------------------------------------------------- values
_TOKEN = (  # a date with its time ("2024-04-13 14:00") is one value
    r"(?:`[^`\n]{1,80}`|\"[^\"\n]{1,80}\"|'[^'\n]{1,80}'|\d{4}-\d{2}-\d{2}[ T]\d{1,2}:\d{2}(?::\d{2})?"
    r"|[^\s,;!?()\[\]{}<>，。；！？、（）【】「」『』“”]+)"
)
_STOP_VALUES = {
    "a",
    "an",
    "the",
    "it",
    "this",
    "that",
    "these",
    "those",
    "be",
    "on",
    "in",
    "to",
    "of",
    "for",
    "and",
    "or",
    "not",
    "something",
    "anything",
    "nothing",
    "default",
    "true?",
    "use",
    "make",
    "see",
    "do",
    "done",
}
_PRONOUN_KEYS = {
    "it",
    "this",
    "that",
    "them",
    "they",
    "he",
    "she",
    "we",
    "you",
    "i",
    "me",
    "one",
    "things",
    "everything",
}


def _clean_value(raw: str) -> str | None:
    """The value as written, without a sentence's trailing punctuation; None when it is not a value."""
    v = raw.strip()
    if v[:1] in "`\"'" and v[-1:] == v[:1] and len(v) >= 2:
        v = v[1:-1].strip()
    else:
        v = v.rstrip(".,:;)\"'”’").strip()
    if not v or len(v) > MAX_VALUE_CHARS or v.casefold() in _STOP_VALUES:
        return None
    return v


# what may follow a value in "the X is Y": the clause ends, or a new one, an adverb or a preposition starts
_VALUE_END = lazy_re.compile(
    r"^\s*(?:$|[.,;:!?)\]}\-–—]|(?:and|or|but|so|because|since|which|that|now|instead|again|too|also|still|then|"
    r"yet|on|in|at|for|from|with|by|to|of|as|when|while|if|after|before|until|via|per|here|there|today|now)\b)",
    re.I,
)
# "X, Y and Z" / "X and Y": a list, of which a one-token value would keep only the first item
_LIST_GOES_ON = lazy_re.compile(
    r"^\s*(?:,\s*|\s+(?:and|or|&)\s+)(?!(?:the|a|an|it|its|we|i|you|they|he|she|this|that|there|which|who|"
    r"then|so|also|now|not|is|are|was|were|has|have|had|will|can|let|please|my|our|your)\b)"
    r"(?:[\w\"'`@./\-]+\s*){1,3}(?:$|[.,;!]|\b(?:and|or)\b)",
    re.I,
)
_NAME_GOES_ON = lazy_re.compile(r"^\s+((?:[A-Z][\w'\-]*\s?){1,3})(?=$|[.,;:!?])")


def _whole_value(v: str, rest: str, raw: str) -> str | None:
    """The value of "the X is Y" once what follows it is read (``rest``): a one-token value that is the head of a
    list ("sci-fi and action films") or of a longer phrase ("Chihuahua mixes", "AI companion assistant") is no
    value (a wrong value is worse than none), except a name that goes on in capitals ("John Zhang"). A quoted
    value is whole."""
    if raw.strip()[:1] in "`\"'“":
        return v
    if _LIST_GOES_ON.match(rest):
        return None
    if _VALUE_END.match(rest):
        return v
    more = _NAME_GOES_ON.match(rest)
    if more and v[:1].isupper():
        whole = f"{v} {more.group(1).strip()}"
        return whole if len(whole) <= MAX_VALUE_CHARS else None
    return None


def _value_like(raw: str, v: str) -> bool:
    """Y of "the X is Y" must look like a value, not an adjective: a digit, ._/:@- , uppercase, or quoted."""
    return raw.strip()[:1] in "`\"'" or bool(re.search(r"[0-9._/:@\-]|[A-Z]", v))


_FUNCTION_WORDS = _PRONOUN_KEYS | {
    "his",
    "her",
    "their",
    "whose",
    "what",
    "which",
    "who",
    "up",
    "should",
    "would",
    "could",
    "will",
    "can",
    "be",
    "been",
    "is",
    "are",
    "was",
    "not",
    "so",
}


# counters an agent reports about its own run (Claude Code's Task results end in "<usage>total_tokens: 16942
# tool_uses: 1 duration_ms: 3521</usage>"): about the tool call, not the user's world
_TELEMETRY = frozenset(
    {"total tokens", "tokens", "tool uses", "duration ms", "duration", "total duration", "cost", "total cost",
     "cost usd", "agentid", "agent id", "elapsed", "elapsed ms", "input tokens", "output tokens"}
)  # fmt: skip
_TWO_THINGS = lazy_re.compile(r"\s(?:and|or)\s|&|\+|/|和|与|及|或")


def _key_ok(key: str) -> bool:
    """A key is a noun phrase: not a pronoun, not a number, no pronoun or auxiliary among its words, not two things
    joined ("the pattern and colors"), not an agent's own usage counter."""
    return (
        bool(key)
        and not key.isdigit()
        and not any(w in _FUNCTION_WORDS for w in key.split())
        and key not in _TELEMETRY
        and not (_TWO_THINGS.search(key) and not _HAS_CJK_KEY.search(key))
    )


_HAS_CJK_KEY = lazy_re.compile(
    f"[{IDEOGRAPHS}]"
)  # a Chinese key may hold 和 ("数据库和缓存的端口" is rare; its value is one)


def _fact(key_text: str, value: str | None, family: str, replaces: str | None = None) -> ExtractedFact | None:
    key = normalize_key(key_text)
    return ExtractedFact(key, value, key_text.strip(), replaces, family) if _key_ok(key) else None


# ----------------------------------------------------------------------------------------------- generic keys
# A key that is only an attribute word ("port", "端口") names nothing by itself: "数据库用 PostgreSQL，端口是 5433" and
# "缓存服务用 Redis，端口是 6380" would share the key 端口, and the second would mark the first superseded. Such a key
# takes the topic a named thing in the clause before it gives (数据库端口, 缓存服务端口): the subject or Latin-named
# object of 用 / use, the owner of a key stated there, "For the X", "X 的配置". Anything else (an interjection, a time
# word, a negated clause) gives none and the key stays bare, so "No, the port is 5434" still supersedes (ours;
# precision over recall, as everywhere in this module).
GENERIC_KEYS = frozenset(
    {
        "port",
        "port number",
        "host",
        "hostname",
        "url",
        "uri",
        "endpoint",
        "address",
        "ip",
        "ip address",
        "path",
        "dir",
        "directory",
        "folder",
        "version",
        "password",
        "user",
        "username",
        "token",
        "timeout",
        "region",
        "bucket",
        "branch",
        "name",
        "id",
        "端口",
        "端口号",
        "地址",
        "ip地址",
        "主机",
        "主机名",
        "域名",
        "版本",
        "版本号",
        "密码",
        "路径",
        "目录",
        "用户",
        "用户名",
        "账号",
        "超时",
        "超时时间",
        "令牌",
        "分支",
        "名字",
        "名称",
    }
)
_CLAUSE_BREAK = lazy_re.compile(r"[,;:，；：、]|\b(?:and|but)\b", re.I)
_NOT_TOPICS = frozenset(
    {
        "ok",
        "okay",
        "noted",
        "sure",
        "yes",
        "yeah",
        "also",
        "now",
        "then",
        "so",
        "note",
        "update",
        "fyi",
        "actually",
        "btw",
        "by the way",
        "and",
        "but",
        "great",
        "thanks",
        "done",
        "right",
        "well",
        "hi",
        "hello",
        "first",
        "next",
        "these",
        "those",
        "there",
        "here",
        *DETERMINER_WORDS,
        "好",
        "好的",
        "嗯",
        "对",
        "是的",
        "行",
        "可以",
        "记一下",
        "记住",
        "注意",
        "另外",
        "还有",
        "对了",
        "然后",
        "那么",
        "所以",
        "现在",
        "目前",
        "不过",
        "但是",
        "首先",
        "其次",
        "最后",
        "收到",
        "明白",
        "谢谢",
        "顺便说一下",
        "更新",
        "补充",
        # time words, conjunctions and adverbs name no topic ("When using Docker": no "when port"; no 今天版本)
        "when",
        "while",
        "after",
        "before",
        "once",
        "if",
        "since",
        "until",
        "because",
        "as",
        "though",
        "although",
        "today",
        "tomorrow",
        "yesterday",
        "tonight",
        "usually",
        "basically",
        "honestly",
        "locally",
        "always",
        "never",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
        "alright",
        "anyway",
        "今天",
        "昨天",
        "明天",
        "平时",
        "刚才",
        "最近",
        "后来",
        "之前",
        "以前",
        "有时",
        "经常",
        "一般",
        "通常",
        "每天",
        "周末",
        "早上",
        "晚上",
        "上午",
        "下午",
        "中午",
        "当时",
        "那时",
        "这时",
        "其实",
        "总之",
        "反正",
    }
)
_EN_TOPIC_LEAD = lazy_re.compile(
    rf"^(?:(?:and|also|then|now|so|but|ok|okay|well|yes|right|alright|anyway|btw|fyi)[,\s]+)*"
    rf"(?:{DETERMINERS}\s+)*",
    re.I,
)
# "For the gateway," names a thing; "For the record," "In other words," "On second thought," do not: "for"
# takes any noun phrase but a discourse one, "in"/"on" only a place a service runs (production, the staging server)
_EN_PREP_TOPIC = lazy_re.compile(
    rf"^(?:for|as for|regarding)\s+(?:{DETERMINERS}\s+)*"
    r"([A-Za-z][\w.\-]*(?:\s+[A-Za-z][\w.\-]*){0,2})$",
    re.I,
)
_EN_PLACE_TOPIC = lazy_re.compile(
    rf"^(?:in|on)\s+(?:{DETERMINERS}\s+)?((?:[A-Za-z][\w.\-]*\s+){{0,2}}"
    r"(?:production|prod|staging|stage|dev|development|test|testing|local|ci|server|host|machine|box|cluster|node|vm|"
    r"container|laptop|environment|env))$",
    re.I,
)
_DISCOURSE = frozenset(
    {
        "record",
        "example",
        "instance",
        "reference",
        "now",
        "once",
        "sure",
        "a while",
        "the moment",
        "the record",
        "short",
        "the most part",
        "what it's worth",
        "your information",
        "clarity",
        "context",
        "comparison",
        "simplicity",
        "safety",
        "completeness",
        "now though",
        "a moment",
    }
)
_EN_TOPIC_VERB = lazy_re.compile(r"\b(?:use|uses|using|runs|running|deploy|deployed)\b\s*", re.I)
_EN_PREPOSITIONS = frozenset({"of", "for", "in", "on", "at", "to", "from", "with", "by"})
_EN_STATED = lazy_re.compile(r"^(.+?)\s+(?:is|are)\s+\S", re.I)
_INNER_DET = lazy_re.compile(rf"\s+{DETERMINERS}\s+", re.I)
# the object of 用/使用/部署在 must be a Latin name: 用 inside 用户, 应用, 有用 is no verb
_ZH_TOPIC_VERB = lazy_re.compile(
    r"(?:使用|采用|选用|改用|跑在|部署在|在用|(?<![备通常应商专公家试费作信有享利占])用)(?=\s*[A-Za-z])"
)
_ZH_TOPIC_TAIL = lazy_re.compile(r"(?:的配置|的设置|那边|这边)$")
_ASCII_NAME = lazy_re.compile(r"[A-Za-z][A-Za-z0-9.+_\-]*")
# a clause that rules something out names no topic, and the search stops there ("no longer use Redis", "除了 Redis")
_NEGATION = lazy_re.compile(
    r"\b(?:no longer|not|don't|do not|doesn't|never|without|except|instead of)\b|不|别|没|除了|而非", re.I
)
_CONTINUE = "\0"  # a clause that states a bare attribute ("版本是 1.25"): look one clause further back
TOPIC_CONTEXT_CHARS = 120  # the topic is looked for in this many characters before the key (ours: bounds the cost)
TOPIC_CLAUSES = 3  # ... and in at most this many clauses (ours: "X 用 Y，版本是 1，端口是 2" needs two)


def _topic_ok(topic: str) -> bool:
    """A topic is a short noun phrase: not a lead word, time word or pronoun; a Chinese one two characters or more
    (one is a fragment: 备 of 备用, 妈 of 我妈)."""
    t = normalize_key(topic)
    if not t or t in _NOT_TOPICS or not _key_ok(t) or len(t) > MAX_ZH_KEY_CHARS or len(t.split()) > 3:
        return False
    return not (_HAS_CJK.search(t) and len(t) < 2)


def _owner(subject: str) -> str:
    """What a stated key belongs to, as a topic for the next attribute: "数据库地址" -> 数据库, "database host" ->
    database, "database" -> database; a bare attribute ("版本") -> ``_CONTINUE``; not a key ("it") -> ""."""
    k = normalize_key(subject)
    if k in GENERIC_KEYS:
        return _CONTINUE
    words = k.split()
    if len(words) > 1 and words[-1] in GENERIC_KEYS:
        rest = " ".join(words[:-1])
        return rest if _topic_ok(rest) else ""
    tail = max(
        (g for g in GENERIC_KEYS if _HAS_CJK.search(g) and k.endswith(g) and len(k) > len(g)), key=len, default=""
    )
    if tail:  # "数据库地址" -> 数据库
        rest = k[: -len(tail)].strip()
        return rest if _topic_ok(rest) else ""
    return subject.strip() if _topic_ok(subject) else ""


def _zh_topic(clause: str) -> str:
    """The topic a Chinese clause names: the subject of 用/使用/部署在 + a Latin name ("数据库用 PostgreSQL" ->
    数据库), or that name when the subject is a pronoun ("我们用 Redis 做缓存" -> Redis); the owner of a key the clause
    states ("数据库地址是 db.internal" -> 数据库); the X of "X 的配置 / X 那边"; else none ("" or ``_CONTINUE``)."""
    c = _zh_key(clause)
    m = _ZH_TOPIC_VERB.search(c)
    if m:
        subject = c[: m.start()].strip()
        if subject:  # a subject that is no topic (今天, 平时) leaves the clause without one
            return subject if _topic_ok(subject) else ""
        obj = _ASCII_NAME.match(c[m.end() :].lstrip())  # "我们用 Redis": the pronoun was taken, the name is the topic
        return obj.group(0) if obj and _topic_ok(obj.group(0)) else ""
    if _ZH_SET.search(c):  # a key the clause states, by the family's own rules (so "天气是晴天" states none)
        stated = zh_set_facts(c, topics=False)  # no topic of its own: the search must not recurse
        return _owner(stated[-1].key_text) if stated else ""
    m = _ZH_TOPIC_TAIL.search(c)
    return c[: m.start()].strip() if m and _topic_ok(c[: m.start()].strip()) else ""


def _en_topic(clause: str, stated_keys: bool = True) -> str:
    """The topic an English clause names: "For the gateway" -> gateway, "the database uses Postgres" -> database,
    "we use Postgres" -> Postgres, the owner of a key it states ("the database host is db.internal" -> database);
    else none ("" or ``_CONTINUE``): "No", "Sorry", "OK" name nothing."""
    c = _EN_TOPIC_LEAD.sub("", clause.strip())
    m = _EN_PREP_TOPIC.match(c) or _EN_PLACE_TOPIC.match(c)
    if m:
        phrase = m.group(1)
        return phrase if _topic_ok(phrase) and phrase.casefold() not in _DISCOURSE else ""
    if re.match(r"(?:in|on|at|by|to|from|with|after|before|when|while|once|if)\b", c, re.I):
        return ""  # any other adverbial lead ("In fact,", "When using Docker,") names no thing
    m = _EN_TOPIC_VERB.search(c)
    if m:
        subject = _EN_TOPIC_LEAD.sub("", c[: m.start()].strip())
        if _topic_ok(subject):
            return subject
        obj = _EN_TOPIC_LEAD.sub("", c[m.end() :]).split()  # "we use Postgres": a name, not "we run tests"
        name = len(obj) == 1 and (obj[0][:1].isupper() or re.search(r"[\d._\-]", obj[0]))
        return obj[0] if name and _topic_ok(obj[0]) else ""
    if stated_keys and _EN_STATED.match(
        c
    ):  # a key the clause states, by the family's own rules ("The weather is nice" states none)
        stated = is_facts(c if re.match(DETERMINERS + r"\s", c, re.I) else "the " + c, topics=False)
        if not stated:
            return ""
        owner = _owner(stated[-1].key_text)
        if owner != _CONTINUE:
            return owner
        # a bare attribute stated after a lead: "For the gateway the host is ..." -> the lead's topic (shorter text)
        head = c[: c.casefold().rfind(stated[-1].key_text.casefold())]
        head = re.sub(rf"(?:\s+{DETERMINERS})+\s*$|^{DETERMINERS}\s*$", "", " " + head, flags=re.I).strip()
        return (_en_topic(head, stated_keys=False) or _CONTINUE) if head else _CONTINUE
    return ""


def _with_topic(key_text: str, before: str) -> str:
    """``key_text``, qualified by the topic the clause before it names (``before``: the sentence up to the key) when
    it is a generic attribute (``GENERIC_KEYS``); unchanged when that clause names none. A clause stating a bare
    attribute passes the search on: "网关用 nginx，版本是 1.25，端口是 9443" -> 网关端口."""
    if normalize_key(key_text) not in GENERIC_KEYS:
        return key_text
    topic = ""
    for clause in reversed(
        [c for c in _CLAUSE_BREAK.split(before[-TOPIC_CONTEXT_CHARS:]) if c.strip()][-TOPIC_CLAUSES:]
    ):
        if _NEGATION.search(clause):
            break
        topic = _zh_topic(clause) if _HAS_CJK.search(clause) else _en_topic(clause)
        if topic != _CONTINUE:
            break
    if not topic or topic == _CONTINUE:
        return key_text
    key_text = LEAD_EN.sub("", key_text.strip())
    return f"{topic}{key_text}" if _HAS_CJK.search(topic[-1] + key_text[:1]) else f"{topic} {key_text}"


def _split_key(sentence: str, m: re.Match[str]) -> tuple[str, str]:
    """(key, its context: the sentence before the match) for a family's match ``m`` with the key in group 1: a key
    with an inner determiner ("gateway the host" in "For the gateway the host is ...") is its last part, the rest
    joins the context."""
    inner = list(_INNER_DET.finditer(m.group(1)))
    left = m.group(1)[: inner[-1].start()] if inner else ""
    if not inner or left.split()[-1].casefold() in _EN_PREPOSITIONS:  # "the port of the database" is one key
        return m.group(1), sentence[: m.start()]
    return m.group(1)[inner[-1].end() :], sentence[: m.start()] + left


# ----------------------------------------------------------------------------------------------- English families
_KEY_WORD = r"[A-Za-z][\w.\-]*"
_KEY = rf"{_KEY_WORD}(?:\s+{_KEY_WORD}){{0,{MAX_KEY_WORDS - 1}}}"
_IS = lazy_re.compile(
    rf"\b(?:the|our|my|your)\s+({_KEY})\s+(?:is|are)\s+(?:now\s+|still\s+|currently\s+)?({_TOKEN})", re.I
)
_IS_BARE = lazy_re.compile(
    rf"(?:^|[,;:]\s*)(?!(?:the|a|an|our|my|your)\s)((?:{_KEY_WORD}\s+){{0,2}}{_KEY_WORD})\s+(?:is|are)\s+"
    rf"(?:now\s+|still\s+|currently\s+)?({_TOKEN})",
    re.I,
)
# the verbs that give a setting a new value ("set X to Y", "raised X from A to B"), every inflection: one list for
# both families, so that a verb read in one form is read in the other (ours)
_CHANGE_STEMS = (
    "set sets setting",
    "change changes changed changing",
    "update updates updated updating",
    "bump bumps bumped bumping",
    "switch switches switched switching",
    "reconfigure reconfigures reconfigured reconfiguring",
    "configure configures configured configuring",
    "migrate migrates migrated migrating",
    "move moves moved moving",
    "raise raises raised raising",
    "lower lowers lowered lowering",
    "increase increases increased increasing",
    "decrease decreases decreased decreasing",
    "reduce reduces reduced reducing",
    "upgrade upgrades upgraded upgrading",
    "downgrade downgrades downgraded downgrading",
    "went",
)
CHANGE_VERBS = tuple(w for forms in _CHANGE_STEMS for w in forms.split())
_CHANGE = "|".join(sorted(CHANGE_VERBS, key=len, reverse=True))
_SET = lazy_re.compile(rf"\b(?:{_CHANGE})\s+(?:the\s+|our\s+|my\s+)?({_KEY})\s+to\s+({_TOKEN})", re.I)
# a unit after the old number ("from 2500 ms to 8000 ms"): the values are the numbers, as everywhere (ours)
_UNIT = r"(?:ms|s|secs?|seconds?|mins?|minutes?|h|hours?|days?|[kmgt]i?b|px)(?!\w)"
_SWITCH = lazy_re.compile(
    rf"\b(?:{_CHANGE})\s+(?:(?:the|our|my)\s+)?(?:({_KEY})\s+)?from\s+({_TOKEN})(?:(?<=\d)\s*{_UNIT})?\s+"
    rf"(?:over\s+)?to\s+({_TOKEN})",
    re.I,
)
_RETRACT = lazy_re.compile(
    rf"\b(?:no longer|don't|do not|won't|will not) (?:use|using|need|run|depend on)\s+(?:the\s+)?({_TOKEN})", re.I
)
_ASSIGN = lazy_re.compile(rf"(?<![\w?&/.=:!<>(,+*%-])([A-Za-z_][\w.\-]{{0,40}})\s*(?<![=!<>])=(?![=>])\s*({_TOKEN})")
_ASSIGN_END = lazy_re.compile(r"^\s*(?:$|[,;#&|，。；]|\b(?:and|for|in|on|now|then|instead)\b|[A-Za-z_][\w.\-]*\s*=)")
_ENV_KEY = lazy_re.compile(r"^[A-Z][A-Z0-9_]*$")
_COLON = lazy_re.compile(rf"^\s*(?:[-*]\s+)?([A-Za-z_][\w.\-]{{0,40}}):\s+({_TOKEN})\s*$")
_SPEAKERS = {"user", "assistant", "system", "tool", "human", "ai", "note", "warning", "error", "tip", "example", "todo"}


_BARE_LEADS = frozenset(
    {
        "no",
        "not",
        "maybe",
        "apparently",
        "currently",
        "today",
        "still",
        "just",
        "anyway",
        "wait",
        "sorry",
        "lol",
        "oops",
        "hmm",
        "correction",
        "please",
        "finally",
        "perhaps",
        "probably",
    }
)


def _bare_key(key_text: str) -> str:
    """The key of a determiner-less "X is Y", or "" when it is none: lead words dropped ("Btw redis port" -> redis
    port), then it must hold no determiner or lead word ("Now the port" is the determiner family's) and end in
    an attribute word (``GENERIC_KEYS``: "Noted, redis port is 6380")."""
    words = key_text.split()
    while words and (
        words[0].casefold() in _NOT_TOPICS or words[0].casefold() in _BARE_LEADS or words[0].casefold().endswith("ly")
    ):
        words.pop(0)
    if not words or any(w.casefold() in _NOT_TOPICS or w.casefold() in _BARE_LEADS for w in words):
        return ""
    k = normalize_key(" ".join(words))
    return " ".join(words) if k in GENERIC_KEYS or k.rsplit(" ", 1)[-1] in GENERIC_KEYS else ""


def is_facts(sentence: str, topics: bool = True) -> list[ExtractedFact]:
    """ "the X is Y" / "our X is now Y" with a value-like Y; "X is Y" at the start of a clause when X ends in an
    attribute word (``GENERIC_KEYS``)."""
    out = []
    for m in _IS.finditer(sentence):
        v = _clean_value(m.group(2))
        if v and _value_like(m.group(2), v) and "\\n" not in v and not _HYPOTHETICAL.search(sentence[: m.start()]):
            v = _whole_value(v, sentence[m.end(2) :], m.group(2))
            key, before = _split_key(sentence, m)
            out.append(_fact(_with_topic(key, before) if topics else key, v, "is") if v else None)
    for m in _IS_BARE.finditer(sentence):
        v = _clean_value(m.group(2))
        key = _bare_key(m.group(1))
        if v and _value_like(m.group(2), v) and "\\n" not in v and key:
            if _HYPOTHETICAL.search(sentence[: m.start(1)]):
                continue
            v = _whole_value(v, sentence[m.end(2) :], m.group(2))
            out.append(_fact(_with_topic(key, sentence[: m.start(1)]) if topics else key, v, "is") if v else None)
    return [f for f in out if f]


# "unless the string is ARGV", "if the port is 80": a condition, not a statement
_HYPOTHETICAL = lazy_re.compile(
    r"\b(?:unless|if|when|whenever|whether|until|once|as long as|suppose|assuming)\s*$", re.I
)


def set_facts(sentence: str) -> list[ExtractedFact]:
    """ "set/change/update/switch X to Y" (not "X from A to B": that is ``switch_facts``)."""
    out = []
    for m in _SET.finditer(sentence):
        if re.search(r"\bfrom\b", m.group(1), re.I):
            continue
        v = _clean_value(m.group(2))
        if v and (_value_like(m.group(2), v) or _ends_clause(sentence[m.end(2) :])):
            out.append(_fact(_with_topic(*_split_key(sentence, m)), v, "set"))
    return [f for f in out if f]


_CLAUSE_END = lazy_re.compile(r"^\s*(?:$|[.,;:!)]|(?:now|instead|again|please|too|everywhere|by default)\b)", re.I)


def _ends_clause(rest: str) -> bool:
    """ "set the log level to debug." — a plain word is a value only where the clause ends ("set up the mock to
    raise an error" is a purpose, not a setting)."""
    return bool(_CLAUSE_END.match(rest))


_NUMBER = lazy_re.compile(r"^[\d.,]+%?$")


def switch_facts(sentence: str) -> list[ExtractedFact]:
    """ "switched [X] from A to B": X = B, replacing A. Without X the key is resolved at store time from whatever
    currently holds A (else A itself becomes the key)."""
    out = []
    for m in _SWITCH.finditer(sentence):
        old, new = _clean_value(m.group(2)), _clean_value(m.group(3))
        if not old or not new:
            continue
        key_text = m.group(1) or ""
        key = normalize_key(key_text) if key_text else ""
        if key_text and not _key_ok(key):
            continue
        if not key and _NUMBER.match(old) and _NUMBER.match(new):
            continue  # "the output changed from 344 to 345": no key names what the numbers are
        out.append(ExtractedFact(key, new, key_text.strip(), old, "switch"))
    return out


def retract_facts(sentence: str) -> list[ExtractedFact]:
    """ "no longer use A" / "don't use A anymore": A retracted (value None), key resolved at store time."""
    out = []
    for m in _RETRACT.finditer(sentence):
        old = _clean_value(m.group(1))
        if old and (
            m.group(0).lower().startswith("no longer") or re.search(r"\b(?:anymore|any more)\b", sentence, re.I)
        ):
            out.append(ExtractedFact("", None, "", old, "retract"))
    return out


def assign_facts(sentence: str) -> list[ExtractedFact]:
    """ "KEY=VALUE" / "key = value" (config, env files, prose "port = 5433"); not ``==``, not call arguments."""
    out = []
    for m in _ASSIGN.finditer(sentence):
        v = _clean_value(m.group(2))
        rest = sentence[m.end(2) :]
        quoted = m.start(1) > 0 and sentence[m.start(1) - 1] == "`" and m.group(2).endswith("`")  # `KEY=value`
        if quoted:
            v = _clean_value(m.group(2)[:-1])
        elif m.group(1).startswith(("self.", "this.", "cls.")) or rest[:1] == "(" or not _ASSIGN_END.match(rest):
            continue  # "x = compute(y)", "answer = await ask()", "self.x = y" are code, not settings
        if not _ENV_KEY.match(m.group(1)) and not _ASSIGN_LEAD.search(sentence[: m.start(1)]):
            continue  # `return_coder=True`, -F "file=x", "init it with refresh=files": an argument, not a setting
        if v:
            out.append(_fact(m.group(1), v, "assign"))
    return [f for f in out if f]


# where a lowercase "key = value" states a setting: alone on its line, or after a verb of setting ("Set port=5433")
_ASSIGN_LEAD = lazy_re.compile(
    r"(?:^|[.;:!,]\s|\b(?:set|sets|setting|use|using|export|add|added|put|changed?|now|that)\s+)\s*$", re.I
)


# "inflating: x.img", "Downloading: ...": a tool reporting its progress, not a thing and its value
_ACTION_KEY = lazy_re.compile(
    r"^(?:inflating|extracting|creating|downloading|installing|collecting|building|compiling|copying|deleting|"
    r"removing|writing|checking|resolving|fetching|processing|running|cloning|unpacking|linking|uploading)$",
    re.I,
)


def colon_facts(lines: list[str]) -> list[ExtractedFact]:
    """ "key: value" lines that look like configuration: the key has ``_``, ``.`` or a digit, or the line sits in a
    run of at least two such lines (YAML, INI-like listings). Prose ("Note: this matters") has no one-token value."""
    matches = [_COLON.match(line) for line in lines]
    matches = [None if m and _ACTION_KEY.match(m.group(1)) else m for m in matches]
    out = []
    for i, m in enumerate(matches):
        if not m or m.group(1).casefold() in _SPEAKERS:
            continue
        in_run = (i > 0 and matches[i - 1] is not None) or (i + 1 < len(matches) and matches[i + 1] is not None)
        if not (in_run or re.search(r"[_.\d]", m.group(1))):
            continue
        v = _clean_value(m.group(2))
        if v:
            out.append(_fact(m.group(1), v, "colon"))
    return [f for f in out if f]


# ----------------------------------------------------------------------------------------------- Chinese families
_ZH_VERBS = "设置为|设置成|设为|更改为|修改为|改为|改成|换成|更新为|调整为|切换到|切换为|是"
_ZH_SET = lazy_re.compile(rf"({_ZH_VERBS})(?:(?<!是)了)?\s*({_TOKEN})")
_ZH_KEY_STOP = lazy_re.compile(r"[，。；：、！？,;:!?（）()\n]")
_ZH_KEY_LEAD = lazy_re.compile(
    r"^(?:(?:现在|目前|已经|后来|然后|之后|刚才|刚刚|其实|但是|但|而且|那么|因为|所以|看来|另外|不过|总之|"
    r"我们|咱们|我|你|请|就|也|都|要|把|将|已|先|再|得)+)?"
    r"(?:(?:在?用|使用|采用)的)?"
)
_ZH_KEY_TAIL = lazy_re.compile(r"(?:现在|目前|已经|已|都|也|就|要|会|应该|得|还|仍然|依然)+$")
_ZH_VALUE_END = lazy_re.compile(r"[了吧啊呢的。，！]+$")
_ZH_VALUE_CUT = lazy_re.compile(r"[，。；！？、（）]")
_ZH_SWITCH = lazy_re.compile(rf"从\s*({_TOKEN}?)\s*(?:换成|改为|改成|切换到|切换为|迁移到|升级到|换到)\s*({_TOKEN})")
_ZH_RETRACT = lazy_re.compile(rf"不再(?:用|使用|需要|采用|依赖)\s*({_TOKEN})")


def _zh_value(raw: str) -> str | None:
    v = _ZH_VALUE_CUT.split(raw, 1)[0]
    v = _ZH_VALUE_END.sub("", v.strip())
    return _clean_value(v) if v else None


def _zh_phrase(before: str) -> str:
    """The text since the last clause break: where the key of "X 改为 Y" is written."""
    return _ZH_KEY_STOP.split(before)[-1].strip()


def _zh_key(phrase: str) -> str:
    """The key in ``phrase`` (``_zh_phrase``), minus lead words (把, 将, 我们...) and adverbs."""
    key = phrase
    key = _ZH_KEY_LEAD.sub("", key).strip().lstrip("的").strip()  # "我们的测试服务器端口": 我们 taken, 的 left
    return _ZH_KEY_TAIL.sub("", key).strip()


# 是 bound into a word with what precedes it: 真是 (really), 只是 (merely), 总是 (always), 但是 (but), 就是, 也是,
# 还是, 可能是, 不是 ...: "你真是个聪明的AI伴侣" judges, "毕竟我只是一个AI助手" excuses; neither states X = Y
_ZH_BOUND = lazy_re.compile(
    r"(?:真|只|总|但|可能|也许|的确|确实|不|而|或|于|要|倒|算|像|正|即使|毕竟|其实|不仅|仍|并|便|应该|一定|肯定|大概|"
    r"或许|似乎|好像)$"
)
_ZH_ALSO = lazy_re.compile(r"(?:也|都|还|又|才)$")  # "端口也是 5433" states a value; "吃到美食也是一种满足" judges
_ZH_CLASSIFIER = lazy_re.compile(r"^[一这那]?(?:个|种|件|部|名|位|份|款|家|所|条|场)(?=..)")  # "一名摄影师" -> 摄影师
# what a 是 that judges or predicates goes on with: a degree adverb (非常 很 最 ...), a modal (会 能 可以 ...), a
# person (a clause: "我的建议是你应该..."), 否 (是否: whether)
_ZH_JUDGED = lazy_re.compile(
    r"^(?:非常|很|最|比较|十分|特别|相当|挺|太|超|极|更|真|多么|会|能|可以|应该|需要|要|你|我|他|她|否)"
)
_ZH_PRONOUN_END = lazy_re.compile(r"(?:我|你|他|她|它|我们|你们|他们)$")  # "即使我是AI助手": a person, no attribute
_ZH_PRONOUN_KEY = lazy_re.compile(
    r"^(?:其(?![中实他余次])|它的|它|他的|她的|这个|那个|这(?!里)|那(?!里))"
)  # "其年龄": whose, the clause before says
_ZH_ASSIGNS = lazy_re.compile(r"是|为|改|设|换|切换")
_ZH_ATTENDED = lazy_re.compile(r"^(?:我将要参加的|我要参加的|我参加的|我将参加的|我参加了)")
_ZH_NAMED = lazy_re.compile(rf"^([{IDEOGRAPHS}A-Za-z0-9]{{2,12}}?)是我的[{IDEOGRAPHS}]{{1,4}}$")


def _zh_whole(sentence: str, m: re.Match[str], v: str) -> str | None:
    """A value cut at 、 or ， that goes on with more items and no new setting ("参加美食节，品味各国佳肴，现场运动
    挑战") is a list: the whole of it up to the sentence's end, or nothing when that is too long (a list cut to its
    first item is a wrong value). What goes on as a clause of its own ("主角的情感变化，他一开始...") leaves the value
    as it was."""
    rest = sentence[m.end(2) :]
    if rest[:1] not in ("，", "、", ","):
        return v
    tail = re.split(r"[。！？；]", rest, maxsplit=1)[0]
    items = [x for x in re.split(r"[，、,]", tail) if x.strip()]
    if _ZH_ASSIGNS.search(tail) or any(len(x) > 16 or _ZH_CLAUSE.search(x) for x in items):
        return v  # a new clause, not more items: "端口改为 5434，主机改为 db"
    whole = _ZH_VALUE_END.sub("", (m.group(2) + tail).strip())
    return whole if len(whole) <= MAX_VALUE_CHARS else None


# what starts a clause of its own rather than one more item of a list: a person, a conjunction, a modal
_ZH_CLAUSE = lazy_re.compile(r"我|你|他|她|它|咱|而且|但是|不过|因为|所以|如果|可以|需要|应该|能够|只能|无法")


def _zh_owner(before: str) -> str:
    """The thing a pronoun key (其年龄, 它的规模) is about, from the clause before it: a name ("李明辉是我的上司，
    其年龄是44岁" -> 李明辉) or a named event ("我将要参加的销售创新研讨会，它的规模是八百人" -> 销售创新研讨会);
    "" for none."""
    clause = _ZH_KEY_STOP.split(before.rstrip().rstrip("，,"))[-1].strip()
    clause = _ZH_ATTENDED.sub("", clause)
    named = _ZH_NAMED.match(clause)
    if named:
        return named.group(1)
    return clause if 2 <= len(clause) <= 14 and not _ZH_ASSIGNS.search(clause) else ""


def zh_set_facts(sentence: str, topics: bool = True) -> list[ExtractedFact]:
    """ "X 设置为/改为/换成/是 Y". With 是, Y must look like a value (digit, Latin, code) or X must be an attribute
    phrase with 的 ("我的名字是张三"); "我是学生" is not a fact. A 是 that judges is none either: bound into a word
    (真是, 只是, 总是, 但是, 是否 ...), going on with a degree adverb or a modal ("是非常重要的", "是会..."), or after a
    person. A pronoun key (其年龄, 它的规模) takes the name the clause before gives, or is dropped."""
    out = []
    for m in _ZH_SET.finditer(sentence):
        before = sentence[: m.start()]
        phrase = _zh_phrase(before)
        key_text = _zh_key(phrase)
        if not key_text or len(key_text) > MAX_ZH_KEY_CHARS or "从" in key_text:
            continue
        if m.group(1) == "是":
            raw = m.group(2)
            if raw.startswith("否") or _ZH_PRONOUN_END.search(key_text) or _ZH_BOUND.search(phrase):
                continue
            if not re.search(r"[0-9A-Za-z._/:@]", raw) and raw[:1] not in "`\"'":
                raw = _ZH_CLASSIFIER.sub("", raw)
                if _ZH_ALSO.search(phrase) or _ZH_JUDGED.match(raw) or m.group(2).endswith("的"):
                    continue
        if _ZH_PRONOUN_KEY.match(key_text):
            owner = _zh_owner(before[: len(before.rstrip()) - len(phrase)])
            if not owner:
                continue
            key_text = owner + "的" + _ZH_PRONOUN_KEY.sub("", key_text).lstrip("的")
        v = _zh_value(_ZH_CLASSIFIER.sub("", m.group(2)) if m.group(1) == "是" else m.group(2))
        if v:
            v = _zh_whole(sentence, m, v)
        if not v:
            continue
        # 的 inside the key marks an attribute ("我的名字是"); a final 的 is an adverb ("那就真的是完美了")
        if m.group(1) == "是" and not (
            re.search(r"[0-9A-Za-z._/:@]", v) or "的" in phrase.rstrip("的") or m.group(2)[:1] in "`\"'"
        ):
            continue
        if m.group(1) == "是" and re.search(r"(?:什么|多少|哪|谁|几)", v):
            continue
        out.append(
            _fact(
                _with_topic(key_text, before[: len(before.rstrip()) - len(phrase)]) if topics else key_text, v, "zh_set"
            )
        )
    return [f for f in out if f]


def zh_switch_facts(sentence: str) -> list[ExtractedFact]:
    """ "[X]从 A 换成/改为/迁移到 B": X = B replacing A (X optional, as in English)."""
    out = []
    for m in _ZH_SWITCH.finditer(sentence):
        old, new = _zh_value(m.group(1)), _zh_value(m.group(2))
        if not old or not new:
            continue
        before = sentence[: m.start()]
        phrase = _zh_phrase(before)
        key_text = _zh_key(phrase)
        if key_text and len(key_text) <= MAX_ZH_KEY_CHARS:  # before the topic: an unbounded phrase is no key
            key_text = _with_topic(key_text, before[: len(before.rstrip()) - len(phrase)])
        key = normalize_key(key_text) if key_text and len(key_text) <= MAX_ZH_KEY_CHARS else ""
        out.append(ExtractedFact(key if _key_ok(key) else "", new, key_text if key else "", old, "zh_switch"))
    return out


def zh_retract_facts(sentence: str) -> list[ExtractedFact]:
    """ "不再用/使用 A": A retracted."""
    out = []
    for m in _ZH_RETRACT.finditer(sentence):
        old = _zh_value(m.group(1))
        if old:
            out.append(ExtractedFact("", None, "", old, "zh_retract"))
    return out


_HAS_CJK = lazy_re.compile(f"[{IDEOGRAPHS}]")


def _sentence_facts(s: str) -> list[ExtractedFact]:
    if _HAS_CJK.search(s):
        switched = zh_switch_facts(s)
        rest = _ZH_SWITCH.sub(" ", s) if switched else s
        retracted = zh_retract_facts(rest) if "不再" in rest else []
        return (
            switched
            + retracted
            + zh_set_facts(_ZH_RETRACT.sub(" ", rest) if retracted else rest)
            + (assign_facts(rest) if "=" in s else [])
        )
    low = s.lower()  # cheap gates: most sentences hold none of the words a family needs
    switched = switch_facts(s) if " from " in low else []
    rest = _SWITCH.sub(" ", s) if switched else s
    out = switched
    if " use" in low or " need" in low or " run" in low or " depend" in low:
        out = out + retract_facts(rest)
    if " to " in low:
        out = out + set_facts(rest)
    if " is " in low or " are " in low:
        out = out + is_facts(rest)
    if "=" in s:
        out = out + assign_facts(rest)
    return out


def fact_texts(turn: Any) -> tuple[list[str], list[str]]:
    """What a ``Turn``'s facts are extracted from: (its user and assistant texts, its tool results). Tool-call
    arguments are commands, not statements; tool results are read as code (``code_facts``)."""
    return [m.text for m in turn.messages if m.text], [
        r.content for m in turn.messages for r in m.tool_results if r.content
    ]


# what opens a block of code, and what closes it: markdown fences, aider's <source> blocks and its SEARCH/REPLACE
# edit blocks
_OPENS = (("```", "```"), ("~~~", "~~~"), ("<source", "</source>"), ("<<<<<<< SEARCH", ">>>>>>> REPLACE"))
# a line that is code by its shape: indented (markdown code, a program, a traceback), a numbered listing line
# ("1427:  DAYS = ...", "51│class Coder:"), a diff line, a prompt
_CODE_LINE = lazy_re.compile(r"^(?: {4}|\t)|^\s*\d+\s*[:│|]\s|^[+-](?![-+\s])|^(?:>>>|\$) ")
# pasted output from here on: a traceback, a test run
_OUTPUT_STARTS = lazy_re.compile(
    r"^(?:Traceback \(most recent call last\)|=+ .*(?:test session starts|FAILURES|ERRORS).* =+|(?:_ ){4,}|E {2,}\S)"
)
_USAGE = lazy_re.compile(r"<usage>.*?(?:</usage>|\Z)", re.S)  # an agent's usage counters (Claude Code Task results)


def split_code(text: str) -> tuple[str, str]:
    """(prose, code) of a message, line by line: fenced blocks (```` ``` ````, ``~~~``, aider's ``<source>`` and
    SEARCH/REPLACE blocks), code-shaped lines (``_CODE_LINE``) and everything after a traceback or a test run's
    header are code; the rest is prose. Only settings are facts in code (``code_facts``)."""
    prose: list[str] = []
    code: list[str] = []
    closer: str | None = None
    output = False
    for line in text.split("\n"):
        if closer is not None:
            code.append(line)
            if closer in line:
                closer = None
            continue
        bare = line.lstrip()
        opened = next((end for start, end in _OPENS if bare.startswith(start)), None)
        if opened is not None:
            code.append(line)
            rest = bare[3:] if opened in ("```", "~~~") else bare[1:]
            closer = None if opened in rest else opened
            continue
        output = output or bool(_OUTPUT_STARTS.match(line))
        (code if output or _CODE_LINE.match(line) else prose).append(line)
    return "\n".join(prose), "\n".join(code)


# an environment setting as written in a .env file or a shell: KEY=value, no space around "=" ("DAYS = 'days'" in
# a program is a constant)
_ENV_LINE = lazy_re.compile(r"^\s*(?:export\s+)?[A-Z][A-Z0-9_]*=\S")


def code_facts(text: str) -> list[ExtractedFact]:
    """Facts in code and tool output: only settings — ``ENV_STYLE=value`` and config-like ``key: value`` runs.
    ``x = 1`` in a program is a variable, not a fact about the project (ours)."""
    raw = [line for line in text[:MAX_TEXT_CHARS].splitlines() if line.strip()]
    env = [f for line in raw if _ENV_LINE.match(line) for f in assign_facts(line.strip()) if _ENV_KEY.match(f.key_text)]
    listing = [line for line in raw if not re.match(r"^\s*\d+\s*[:│|]\s", line)]  # a file shown with line numbers
    return env + colon_facts([line.strip() for line in listing])


def extract_facts(texts: Iterable[str], code: Iterable[str] = ()) -> list[ExtractedFact]:
    """Facts stated in ``texts`` (a turn's user and assistant messages: every family on their prose, ``code_facts``
    on their fenced blocks) and ``code`` (tool results: ``code_facts`` only), in order of appearance, one per
    (key, value, replaced) — the last statement of a key in a turn wins at store time. Pure; ~0.1 ms for a
    typical turn (``benchmarks/bench_facts.py``)."""
    out: list[ExtractedFact] = []
    seen: set[tuple[str, str | None, str | None]] = set()
    chunks = [(t, False) for t in texts if t] + [(t, True) for t in code if t]
    for text, is_code in chunks:
        if "<usage>" in text:
            text = _USAGE.sub("\n", text)
        found: list[ExtractedFact] = []
        prose, fenced = ("", text) if is_code else split_code(text)
        if prose:
            parts = sentences(prose)
            for s in parts:
                found.extend(_sentence_facts(s))
            found.extend(colon_facts(parts))
        if fenced:
            found.extend(code_facts(fenced))
        for f in found:
            ident = (f.key, normalize_value(f.value), normalize_value(f.replaces))
            if ident not in seen:
                seen.add(ident)
                out.append(f)
    return out
