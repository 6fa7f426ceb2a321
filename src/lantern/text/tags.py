"""Tag a turn by pattern: the *lookup hints* of the keyword signal (docs/architecture.md §2.5). No LLM, no dictionary.

Public API
----------
``extract_tags(text) -> list[Tag]``
    Pattern-found hints, unique by value, in order of first appearance. Kinds (``Tag.kind``):

    ========== ==========================================================================================
    kind       what is found (examples)
    ========== ==========================================================================================
    url        ``https://x.org/a``, ``postgres://u@h:5432/db``, ``www.x.com``, bare domains with a
               common TLD (``aider.chat``, ``github.com/a/b``), e-mail addresses, IPv4 addresses; a URL
               ends at whitespace, a delimiter or CJK / fullwidth punctuation (``…/docs，请看`` -> ``…/docs``)
    path       ``src/db/config.py``, ``./x.sh``, ``../a``, ``~/.bashrc``, ``/usr/local/bin``,
               ``C:\\x\\y.txt``, bare file names with a known extension (``foo.py``), dot-files
               (``.env``), ``Makefile``/``Dockerfile``-style names. A ``:line:col`` suffix is not part
               of the path. A relative path needs a known extension, two separators or a trailing one
               (``and/or`` is not a path); an absolute one two separators or an extension (``/help`` is
               not).
    error      exception names (``ValueError``, ``ModuleNotFoundError``, ``KeyboardInterrupt``; also the
               last part of ``openai.APIConnectionError``), error codes (``E0425``, ``F401``,
               ``TS2345``), errno / signal names (``ECONNREFUSED``, ``SIGKILL``), ALL_CAPS error
               constants (``ERR_CONNECTION_REFUSED``), ``HTTP 404``, ``status code 500``,
               ``exit code 137``, ``Errno 111``, and the message of a short ``error: ...`` /
               ``fatal: ...`` line
    date       ``2024-08-05``, ``2024-08-05T19:33:02``, ``08/05/2024``, ``19:33:02``, ``8 May, 2023``,
               ``14 Mar``, ``May 8, 2023``, ``2023年5月8日``, ``5月8日``, ``1:56 pm``
    hash       hex of 7–40 characters with at least one digit and one letter (git shas), 64-hex
               (sha256), UUIDs
    version    ``v1.2.3``, ``v0.50.2-dev``, ``3.11.7``, ``numpy==2.0.1`` / ``>=2.0.1`` (value
               ``2.0.1``), ``Python 3.11`` / ``python3.11`` (value ``3.11``)
    port       ``port 5433``, ``port: 5433``, ``port=5433``, ``PGPORT=5433``, ``--port 5433``,
               ``localhost:8080``, ``db:5432``, ``:5433``, ``端口 5433``, ``端口是5433``, and the
               port of a URL or of ``127.0.0.1:5432`` (value: the digits)
    number     numbers with a unit: ``250ms``, ``1.5 GB``, ``30s``, ``80%``, ``10k``, ``$0.04``,
               ``300 files``, ``14,616 tokens``, ``5秒``, ``3个月``
    identifier ``snake_case``, ``camelCase``, ``PascalCase`` with inner caps (``RepoMap``),
               ``HTTPServer``, ``dotted.module.names``, ``func()`` (value ``func``; not Python
               builtins such as ``print()``), ``__init__``, ALL_CAPS names with an underscore
               (``DATABASE_URL``), ``$HOME`` / ``${HOME}`` (value ``HOME``), CLI flags
               (``--no-auto-commits``), kebab names with a digit (``gpt-4o-mini``), lowercase names with
               a digit (``flake8``, ``sha256``)
    quoted     a short span (2–60 characters) in ``"..."``, ``'...'``, ```...```, “...”, 「...」,
               『...』, 《...》 that is not, as a whole, already another tag (value: the inside)
    ========== ==========================================================================================

    A value carries one kind: the most specific of its occurrences, in the order of the table (url > path >
    error > date > hash > version > port > number > identifier > quoted). Overlaps are resolved the same
    way: a span taken by a more specific kind is not tagged again. Exceptions: the port of a URL is tagged
    too (``url`` and ``port``); a quoted span keeps the tags found inside it; the message of an ``error:``
    line keeps the tags inside it.
    Plain English words are never tags: every pattern needs a digit, an inner separator or capital, a known
    extension, a keyword next to a number ("port 5433") or quoting. A common word inside quotes or
    backticks is a ``quoted`` tag on purpose.

``cjk_bigrams(text) -> str`` (text/cjk.py)
    Rewrites each run of CJK characters (Han, Hiragana, Katakana, Hangul) as space-separated overlapping
    bigrams: ``"数据库端口是5433" -> "数据 据库 库端 端口 口是 5433"``. Used to build the FTS5 index text and
    FTS5 queries the same way (unicode61 alone finds nothing inside a Chinese run; trigram misses 2-character
    words such as 端口). This module uses its bigrams for the CJK terms below.

``hint_terms(tags, extra=()) -> list[str]`` and ``query_terms(text) -> list[str]``
    The two sides of the keyword signal's Jaccard overlap. THE normalization, in one place (``_tag_terms``):

    * every tag value, lowercased and stripped (``number`` values also lose inner spaces: ``1.5 GB`` ->
      ``1.5gb``);
    * ``path``: also the basename and the basename without its extension (``src/app/db.py`` ->
      ``src/app/db.py``, ``db.py``, ``db``; stems of one character are dropped); backslashes read as ``/``;
    * ``url``: also the host; ``version``: also without a leading ``v``; ``hash`` longer than 7: also its
      7-character short form; ``port``: also the words ``port`` and ``端口`` (so "which port ...?" reaches
      every entry that names a port);
    * ``identifier``, ``error``, ``quoted``, ``date`` and tool names: also the word parts of the value (split
      at non-alphanumerics and camelCase humps), by the same rule as the query's plain words (lowercased,
      >= 3 characters, not in ``STOPWORDS``), plus the CJK bigrams of any CJK run in the value.

    ``hint_terms`` = the above over an entry's tags, plus ``extra`` (tool names). ``query_terms`` = the above
    over the query's own tags, plus the query's plain words outside those tags (lowercased, >= 3 characters,
    not stopwords) and the CJK bigrams of its CJK runs. Both unique, in order (tag terms first).

How it runs (cost: ~0.15 ms/KB on code-heavy aider turns, ~0.02 ms for a short chat turn; see the tests).
One ``findall`` of a single token regex (runs of ``[A-Za-z0-9_.,-/\\:@$%~+=]``) over the text; plain words
(all letters, lower/Title/UPPER case) are dropped there by ``str`` methods, without a call; every other token
is located with ``str.find`` and matched once against one anchored grammar (``_GRAMMAR``) whose alternatives
are in priority order. A token that is not one tag as a whole is split at ``= , : ..`` then at ``/``
(``KEY=value``, ``openai/gpt-4o``). A bare number looks at the characters just before it (``port``, ``HTTP``,
``exit code``, ``端口``, ``Python``, ``$``) and just after it (a unit, a month, ``am/pm``, 年/月/日, Chinese
units). URLs (found from ``://`` and ``www.``), ``name()`` calls, ``error:`` lines and quoted spans have their
own passes, each skipped when its trigger substring is absent. Regexes that scan the whole text start with a
literal, so ``re`` can skip ahead; every regex is compiled once, at import.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from lantern import lazy_re
from lantern.model import Tag
from lantern.text.cjk import CJK_RUN, bigram_list

__all__ = [
    "extract_tags",
    "extract_paths",
    "hint_terms",
    "query_terms",
    "STOPWORDS",
    "TAG_HEAD_CHARS",
    "TAG_TAIL_CHARS",
    "tag_window",
    "untagged_span",
]

TAG_HEAD_CHARS, TAG_TAIL_CHARS = 96_000, 32_000  # tags of a huge turn come from its head and tail (ours)


def tag_window(text: str) -> str:
    """The part of a turn that is tagged: all of it up to 128,000 characters (a 115 KB test run is tagged whole,
    ~100 ms), else its first 96,000 and last 32,000 (tagging costs ~1 ms per KB: a 1 MB log would take over a
    second; its head and tail keep the command, the error and the summary line). The full text is still stored
    verbatim and indexed by FTS5, in windows (text/windows.py), so its middle is found by full text."""
    if len(text) <= TAG_HEAD_CHARS + TAG_TAIL_CHARS:
        return text
    return text[:TAG_HEAD_CHARS] + "\n…\n" + text[-TAG_TAIL_CHARS:]


def untagged_span(text: str) -> tuple[int, int]:
    """``(start, end)`` of the part of ``text`` that ``tag_window`` leaves out (``(0, 0)`` when none)."""
    if len(text) <= TAG_HEAD_CHARS + TAG_TAIL_CHARS:
        return 0, 0
    return TAG_HEAD_CHARS, len(text) - TAG_TAIL_CHARS


# --------------------------------------------------------------------------------------------- vocabularies
_EXTENSIONS = (
    "py pyi pyx pyc pyw ipynb js mjs cjs jsx ts tsx vue svelte json jsonl ndjson yaml yml toml ini cfg conf env "
    "md markdown rst txt tex bib csv tsv xml html htm css scss sass less sh bash zsh fish ps1 bat cmd c h cc cpp "
    "cxx hpp hh rs go java kt kts scala rb php cs fs swift m mm lua pl pm r jl dart ex exs erl hs ml clj sql db "
    "sqlite sqlite3 log lock gradle cmake mk proto graphql gql tf tfvars hcl properties pem crt key pub service "
    "socket patch diff bak tmp out err traj parquet feather arrow npy npz pkl pickle pt pth onnx h5 safetensors "
    "bin dat so dylib dll exe whl egg gz tgz bz2 xz zip tar jar war png jpg jpeg gif svg webp ico pdf mp3 mp4 "
    "wav wasm scm dockerfile gitignore gitattributes editorconfig"
).split()
_EXT_SET = frozenset(_EXTENSIONS)
_EXT_ALT = "|".join(sorted(set(_EXTENSIONS), key=lambda s: (-len(s), s)))
_SPECIAL_FILES = frozenset(
    "Makefile Dockerfile Containerfile Gemfile Rakefile Procfile Pipfile Vagrantfile Jenkinsfile Brewfile "
    "Justfile CODEOWNERS".split()
)
_MONTH_NAMES = (
    "Jan January Feb February Mar March Apr April May Jun June Jul July Aug August Sep Sept September Oct "
    "October Nov November Dec December"
).split()
_MONTHS = "(?:" + "|".join(sorted(_MONTH_NAMES, key=len, reverse=True)) + ")"
_MONTH_SET = frozenset(_MONTH_NAMES)
_TLDS = "com|org|net|io|dev|ai|co|edu|gov|chat|cn|uk|de|jp|fr|ru|xyz|cloud"
_ERRNO_SET = frozenset(
    (
        "ECONNREFUSED ECONNRESET ECONNABORTED ETIMEDOUT EADDRINUSE EADDRNOTAVAIL ENOENT EACCES EPERM EEXIST "
        "ENOTDIR EISDIR ENOTEMPTY EPIPE EAGAIN EINVAL ENOMEM ENOSPC EMFILE EHOSTUNREACH ENETUNREACH EBADF EINTR "
        "EROFS ENOTFOUND ENOTSUP EDEADLK EBUSY ESRCH ECHILD ENOEXEC ELOOP ENAMETOOLONG "
        "SIGHUP SIGINT SIGQUIT SIGILL SIGTRAP SIGABRT SIGBUS SIGFPE SIGKILL SIGSEGV SIGPIPE SIGALRM SIGTERM"
    ).split()
)
_SPECIAL_WORDS = _SPECIAL_FILES | _MONTH_SET | _ERRNO_SET  # words the token pass must look at
_CODE_RECEIVERS = frozenset(  # "self.io", "logger.net": attribute access, not a domain
    "self this cls os sys np pd re io json ctx app obj args kwargs config cfg logger log logging torch nn tf "
    "model models db api client server request response req res data utils util core lib settings env".split()
)
_BUILTINS = frozenset(  # "print()" is not a lookup hint
    "print len str int float bool dict list set tuple range open super isinstance issubclass getattr setattr "
    "hasattr type object repr sorted reversed enumerate zip map filter any all min max sum abs next iter id "
    "input format vars dir callable round hash".split()
)

#: Compact English stopword list (function words, auxiliaries, chat filler). Words of < 3 characters never
#: become terms anyway, so they are not listed.
STOPWORDS: frozenset[str] = frozenset(
    """
    the and for are but not you your yours all any can had has have her hers him his its our ours out was
    were who whom whose why how what when where which while with within without would could should shall will
    may might must this that these those there their theirs them they then than too very just also only
    own same such some more most other into onto from upon about above below after before again against
    because been being both did does doing done down during each few further here itself myself yourself
    ourselves themselves himself herself off once over under until nor now she per via yet one ones lot lots
    let lets let's i'm i've i'd i'll you're you've you'd you'll he's she's it's we're we've we'd we'll
    they're they've they'd they'll that's there's what's who's isn't aren't wasn't weren't hasn't haven't
    hadn't doesn't don't didn't won't wouldn't can't cannot couldn't shouldn't mustn't
    please thanks thank okay yes yeah sure like get got make made use used using want need know think see
    said say says tell told ask asked something anything everything nothing thing things way well even still
    much many really actually maybe perhaps already ever every another around through across
    """.split()
)

# ------------------------------------------------------------------------------------------------- patterns
_A = re.ASCII

_TOKEN_RE = lazy_re.compile(r"[A-Za-z0-9_.,\-/\\:@$%~+=]+", _A)
_TOKEN_TRAIL = ".,:;~+"  # dropped from a token's end ("file.py.", "bug.md~", "100k+")
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.,-/\\:@$%~+=")
_PUNCT_ONLY = "_.,-/\\:@$%~+="
# parts of a token that is not one tag as a whole: split at "=", ",", ":", ".." ("KEY=value", "a1b2c3d..e4f5a6b"),
# then a part that is still not one tag at "/" ("openai/gpt-4o")
_SPLIT_RE = lazy_re.compile(r"(?:[^=,:.]|(?<!\.)\.(?!\.))+", _A)
_SLASH_SPLIT_RE = lazy_re.compile(r"[^/]+", _A)
SPLIT_MAX = 1000  # a token longer than this is tagged whole or not at all, never split into its parts (ours)
_DOTFILE_BEFORE = frozenset(" \t\n\r\"'`([{<>*|=:,")  # a leading "." starts a dot-file name only after these

_SEG = r"(?:\.\.|\.?[A-Za-z0-9_@+\-][A-Za-z0-9_.@+\-]*)"
_NAMEEXT = rf"[A-Za-z0-9_][A-Za-z0-9_.+\-]*\.(?i:{_EXT_ALT})"

# One anchored grammar for a token, alternatives in priority order; the group name gives the kind of tag.
_GRAMMAR_SEP = [  # alternatives that need ".", "/", "\\" or "@" in the token
    # url
    r"(?P<email>[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,})",
    r"(?P<ip>(?:\d{1,3}\.){3}\d{1,3})(?::(?P<ipport>\d{1,5}))?",
    rf"(?P<domain>(?:[a-z0-9](?:[a-z0-9\-]*[a-z0-9])?\.)+(?:{_TLDS}))(?::(?P<dport>\d{{2,5}}))?"
    r"(?P<dpath>/[A-Za-z0-9_.\-/%~+=@:]*)?",
    # path
    r"(?P<win>[A-Za-z]:\\[^\\]*(?:\\[^\\]*)*)",
    r"(?P<path>(?=[^A-Za-z]*[A-Za-z])(?:"
    rf"(?:~|\.\.?)/(?:{_SEG}/)*(?:{_SEG})?"  # ~/x ./x ../x
    rf"|/(?:{_SEG}/)+(?:{_SEG})?|/{_NAMEEXT}"  # /a/b, /a.py
    rf"|{_SEG}/(?:{_SEG}/)+(?:{_SEG})?|(?:{_SEG}/)+{_NAMEEXT}|{_SEG}/"  # a/b/c, a/b.py, a/
    rf"|(?=.{{4}}){_NAMEEXT}"  # foo.py (not "a.m")
    r"|\.[a-z][a-z0-9_\-]{1,30}(?:\.[a-z0-9_\-]+)*"  # .env .bashrc
    rf"|(?:{_SEG}\\)+{_NAMEEXT}"  # tests\basic\test_repo.py
    rf"|(?:{_SEG}/)+(?:{'|'.join(sorted(_SPECIAL_FILES))})"  # docker/Dockerfile
    r"))(?::\d+){0,3}",
]
_GRAMMAR_REST = [
    # error
    r"(?P<error>[A-Z][A-Za-z0-9]*[a-z0-9](?:Error|Exception|Warning|Interrupt|Exit|Fault|Failure|Timeout)"
    r"|[A-Z]{1,4}\d{3,5}"
    r"|(?:ERR|E)_[A-Z0-9_]+|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*_(?:ERROR|ERR|FAILED|FAILURE|EXCEPTION|DENIED|REFUSED"
    r"|TIMEOUT|INVALID))",
    # date
    r"(?P<date>\d{4}-(?:0?[1-9]|1[0-2])-(?:0?[1-9]|[12]\d|3[01])"
    r"(?:T\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+\-]\d{2}:?\d{2})?)?"
    r"|\d{1,4}/\d{1,2}/\d{2,4}|\d{1,2}:\d{2}:\d{2})",
    # hash
    r"(?P<hash>[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"|(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])(?:[0-9a-f]{64}|[0-9a-f]{7,40})|[0-9A-F]{64})",
    # version
    r"(?P<version>v\d+(?:\.\d+){1,3}(?:[\-+][0-9A-Za-z.]+)?"
    r"|\d+\.\d+\.\d+(?:[\-.+]?(?:dev|rc|a|b|alpha|beta|post|pre)\d*|\+[0-9A-Za-z.]+)?)",
    r"(?:[A-Za-z0-9_.\-\[\]]*(?:==|~=|!=)|=)(?P<pin>\d+(?:\.\d+)+(?:[\-.]?(?:dev|rc|a|b|post)\d*)?)",
    r"(?i:python|py|node|nodejs|ruby|java|gcc|cuda|go)(?P<named>\d+\.\d+)",
    # port
    r"(?:localhost|\[[0-9a-fA-F:]+\]):(?P<hport>\d{2,5})(?:/[A-Za-z0-9_.\-/%~+=@:]*)?"
    r"|[a-z][a-z0-9_\-]{1,30}:(?P<lport>\d{4,5})(?:/[A-Za-z0-9_.\-/%~+=@:]*)?|:(?P<bport>\d{4,5})",
    r"(?:[A-Z_]*PORT|(?:[a-z_\-]*[_\-])?port|Port)[=:](?P<aport>\d{2,5})",
    # number
    r"(?P<number>\d+(?:[.,]\d+)*(?:[kKMGTB]|ms|us|ns|s|sec|secs|m|min|mins|h|hr|hrs|d|x|%|[KMGT]i?B|kB|MB/s"
    r"|GB/s|Hz|kHz|MHz|GHz|px|fps|rpm|qps|rps)|\$\d+(?:[.,]\d+)*[kKMB]?)",
    # identifier
    r"\$(?P<env>[A-Za-z_][A-Za-z0-9_]+)|%(?P<winenv>[A-Z_][A-Z0-9_]*)%",
    r"(?P<ident>__[a-z][a-z0-9]*(?:_[a-z0-9]+)*__"
    r"|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+"
    r"|--[a-z][a-z0-9]*(?:-[a-z0-9]+)*"
    r"|[A-Za-z_][A-Za-z0-9_]+(?:\.[A-Za-z_][A-Za-z0-9_]+)+"
    r"|_{0,2}[A-Za-z][A-Za-z0-9]*(?:_+[A-Za-z0-9]+)+_{0,2}"
    r"|[a-z]+[0-9]*[A-Z][A-Za-z0-9]*"
    r"|[a-z]{2,}\d+[a-z0-9]*(?:\.\d+)*"
    r"|[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*|[A-Z]{2,}[a-z]{2,}[A-Za-z0-9]*"
    r"|(?=[^\-]*-.*\d|[^\-]*\d)[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+(?:\.\d+)*)+)",
]
_GRAMMAR = lazy_re.compile("|".join(_GRAMMAR_SEP + _GRAMMAR_REST), _A)
_GRAMMAR_PLAIN = lazy_re.compile("|".join(_GRAMMAR_REST), _A)  # for a token without ".", "/", "\\", "@"
_GRAMMAR_IDENT = lazy_re.compile(_GRAMMAR_REST[-1], _A)
_EXC_RE = lazy_re.compile(
    r"[A-Z][A-Za-z0-9]*[a-z0-9](?:Error|Exception|Warning|Interrupt|Exit|Fault|Failure|Timeout)", _A
)
# the version or date that ends a kebab name: pytest-8.3.1, bge-small-en-v1.5, gpt-4o-mini-2024-07-18
_KEBAB_TAIL_RE = lazy_re.compile(r"-(?:(?P<version>v?\d+(?:\.\d+)+)|(?P<date>\d{4}-\d{2}-\d{2}))$", _A)
_NUMERIC_RE = lazy_re.compile(r"-?\d+(?:[.,]\d+)*|\d{1,2}:\d{2}", _A)

# what may stand just before a bare number (searched in the 40 characters before it; anchored at its start)
_BEFORE_NUM_RE = lazy_re.compile(
    r"(?:(?P<port>(?<![A-Za-z])(?:[Pp]ort|PORT)(?:s|\s+number)?\s*(?:is\s+|=\s*|:\s*|of\s+|to\s+|on\s+|#\s*)?"
    r"|(?<![A-Za-z])-p\s+)"
    r"|(?P<zhport>端口(?:号)?\s*(?:是|为|:|：|=|设为|设置为|改为|改成)?\s*)"
    r"|(?P<http>(?:HTTP|http)(?:/[0-9.]+)?\s*:?\s*|(?<![A-Za-z])[Ss]tatus(?:\s+code)?\s*:?\s*)"
    r"|(?P<exit>(?<![A-Za-z])(?:[Ee]xit(?:ed)?(?:\s+with)?\s+(?:code|status)|[Rr]eturned\s+(?:non-zero\s+)?exit\s+status"
    r"|[Ee]rrno)\s*:?\s*)"
    r"|(?P<named>(?<![A-Za-z])(?:[Pp]ython|[Nn]ode(?:\.?js)?|[Vv]ersion|[Rr]elease|[Rr]uby|[Jj]ava|[Gg]o|CUDA|[Cc]uda"
    r"|[Pp]ostgres(?:QL|ql)?|MySQL|[Mm]ysql|[Rr]edis|[Uu]buntu|[Dd]jango|[Rr]eact)\s*(?:[<>=~!^]=?\s*)?)"
    r"|(?P<money>[$€£¥]\s?))$"
)
_BEFORE_NUM_HINT = lazy_re.compile(r"[A-Za-z$€£¥端]")
_UNITS_SPACED = (
    r"ms|us|µs|ns|sec|secs|seconds?|mins?|minutes?|hrs?|hours?|days?|weeks?|months?|years?|"
    r"[KMGTP]i?B|kB|bytes?|KB/s|MB/s|GB/s|Mbps|Gbps|px|em|rem|pt|k?Hz|[MG]Hz|fps|rpm|qps|rps|"
    r"tokens?|chars?|characters?|lines?|files?|rows?|items?|requests?|calls?|turns?|msgs?|messages?|"
    r"percent|dollars?|USD|EUR|RMB|CNY|°C|°F|kg|km|cm|mm|kW|mAh|GPUs?|CPUs?|cores?|threads?|workers?|"
    r"epochs?|steps?|iterations?|retries|attempts?|users?|times"
)
# what may stand just after a bare number (matched at its end)
_AFTER_NUM_RE = lazy_re.compile(
    rf"(?P<unit>\s?(?:{_UNITS_SPACED})(?![\w/\\@$%~+=-]|[.,:;][^\s.,:;])|\s%)"
    rf"|(?P<month>(?:st|nd|rd|th)?\s+{_MONTHS}\.?(?:,?\s+\d{{4}})?(?![A-Za-z]))"
    r"|(?P<zhdate>\s*年(?:\s*\d{1,2}\s*月(?:\s*\d{1,2}\s*[日号])?)?|\s*月\s*\d{1,2}\s*[日号])"
    r"|(?P<zhunit>\s?(?:毫秒|秒钟|秒|分钟|小时|天|周|星期|个月|岁|元|块钱|块|万|亿|千|百|次|个|人|名|米|公里|千米|公斤|斤|克"
    r"|毫升|升|页|行|条|张|本|家|所|度|倍|%|％))"
)
_AMPM_RE = lazy_re.compile(r"\s?[AaPp]\.?[Mm]\.?(?![A-Za-z])")
_DAY_AFTER_MONTH_RE = lazy_re.compile(r"\.?\s+\d{1,2}(?:st|nd|rd|th)?(?:,?\s+\d{4})?(?![\w:])|\s+\d{4}(?!\d)", _A)
# a URL ends at a space, a delimiter, or CJK and fullwidth punctuation (、。，：；！？（）「」【】 …, curly quotes,
# the ellipsis): Chinese and Japanese text runs on after a URL with no space; ideographs in a path (an IRI) stay
_URL_STOP = "\\s<>\"'`)\\]}|\u3000-\u303f\uff01-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65\u2018-\u201f\u2026"
_URL_BODY_RE = lazy_re.compile(f"[^{_URL_STOP}]+")
_URL_PORT_RE = lazy_re.compile(r"[A-Za-z][\w+.\-]*://(?:[^@/\s]*@)?(?:\[[^\]]*\]|[^:/\s?#]+):(\d{1,5})(?!\d)", _A)
_WWW_RE = lazy_re.compile(rf"www\.[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)+(?:/[^{_URL_STOP}]*)?", _A)
_ERRLINE_RE = lazy_re.compile(
    r"^[ \t>#*\-]*(?:[\w.\-]+:[ \t]*)?(?:error|fatal|panic)(?:\[[A-Z]*\d+\])?:[ \t]*(\S[^\n]{1,78}?)[ \t\r]*$",
    _A | re.IGNORECASE | re.MULTILINE,
)
_ERRLINE_TRIGGERS = ("rror:", "RROR:", "atal:", "ATAL:", "anic:", "ANIC:", "rror[")
_QUOTED_RE = lazy_re.compile(  # each branch starts with its quote character (a lookbehind first would be 20x slower)
    r"`([^`\n]{2,60})`"
    r"|\"(?<![\w\"\\]\")([^\"\n]{2,60})\"(?![\w\"])"
    r"|'(?<![\w'\\]')([^'\n]{2,60})'(?!\w)"
    r"|“([^”\n]{2,60})”|「([^」\n]{2,60})」|『([^』\n]{2,60})』|《([^》\n]{2,60})》|‘([^’\n]{2,60})’"
)
_QUOTE_CHARS = "`\"'“「『《‘"
_HAS_WORDCHAR = lazy_re.compile(r"[A-Za-z\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")

_WORD_RE = lazy_re.compile(r"[A-Za-z0-9][A-Za-z0-9_']*", _A)
_HUMP_RE = lazy_re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+", _A)
_SPACES_RE = lazy_re.compile(r"\s+")
_HOST_RE = lazy_re.compile(r"(?:[a-z][\w+.:\-]*://)?(?:[^@/\s]*@)?([^:/\s?#]+)")

_TRAIL = ".,;:!?)]}'\"`>"
_PRIORITY = {
    k: i
    for i, k in enumerate(("url", "path", "error", "date", "hash", "version", "port", "number", "identifier", "quoted"))
}


# ---------------------------------------------------------------------------------------------- extraction
class _Scanner:
    """Collects (start, end, kind, value); a span taken by a claiming match is not tagged again."""

    __slots__ = ("text", "mask", "found")

    def __init__(self, text: str) -> None:
        self.text = text
        self.mask = bytearray(len(text))
        self.found: list[tuple[int, int, str, str]] = []

    def take(self, s: int, e: int, kind: str, value: str | None = None) -> bool:
        if e <= s or self.mask.find(1, s, e) >= 0:
            return False
        self.mask[s:e] = b"\x01" * (e - s)
        self.found.append((s, e, kind, self.text[s:e] if value is None else value))
        return True

    def add(self, s: int, e: int, kind: str, value: str | None = None) -> None:
        """Record without claiming (tags inside another tag: a URL's port, an error message's contents)."""
        self.found.append((s, e, kind, self.text[s:e] if value is None else value))


def _strip_trailing(text: str, s: int, e: int) -> int:
    while e > s and text[e - 1] in _TRAIL:
        e -= 1
    return e


def _valid_port(digits: str) -> bool:
    return 1 <= int(digits) <= 65535


def _scan_urls(sc: _Scanner) -> bool:
    """URLs from ``://`` and ``www.``; returns whether any was claimed."""
    t = sc.text
    any_url = False
    if "://" in t:
        i = t.find("://")
        while i >= 0:
            j = i
            while j > 0 and (t[j - 1].isalnum() or t[j - 1] in "+.-") and t[j - 1].isascii():
                j -= 1
            while j < i and not t[j].isalpha():  # a scheme starts with a letter
                j += 1
            m = _URL_BODY_RE.match(t, i + 3) if j < i else None  # (read only after a scheme: "://" runs stay linear)
            if m:
                e = _strip_trailing(t, j, m.end())
                if e > i + 3 and sc.take(j, e, "url"):
                    any_url = True
                    pm = _URL_PORT_RE.match(t, j, e)
                    if pm and _valid_port(pm.group(1)):
                        sc.add(pm.start(1), pm.end(1), "port")
                i = t.find("://", max(e, i + 3))
            else:
                i = t.find("://", i + 3)
    if "www." in t:
        for m in _WWW_RE.finditer(t):
            if m.start() == 0 or not (t[m.start() - 1].isalnum() or t[m.start() - 1] in "./"):
                if sc.take(m.start(), _strip_trailing(t, m.start(), m.end()), "url"):
                    any_url = True
    return any_url


def _numeric(sc: _Scanner, s: int, e: int) -> None:
    """A bare number (``5433``, ``1.5``, ``14,616``, ``1:56``): tagged only by what stands before or after it."""
    t = sc.text
    tok = t[s:e]
    w = max(0, s - 40)
    # every context starts with a letter, 端 or a currency sign: without one in the window the search (40 starts,
    # a dozen alternatives each) cannot match ("1:1:1:…" would pay it per number)
    m = _BEFORE_NUM_RE.search(t, w, s) if _BEFORE_NUM_HINT.search(t, w, s) else None
    if m:
        kind = m.lastgroup
        if kind in ("port", "zhport"):
            if tok.isdigit() and 2 <= len(tok) <= 5 and _valid_port(tok):
                sc.take(s, e, "port")
                return
        elif kind == "http":
            if len(tok) == 3 and tok.isdigit() and tok[0] in "12345":
                sc.take(m.start(), e, "error")
                return
        elif kind == "exit":
            if tok.isdigit():
                sc.take(m.start(), e, "error")
                return
        elif kind == "named":
            if "." in tok and ":" not in tok and "," not in tok:
                sc.take(s, e, "version")
                return
        elif kind == "money":
            sc.take(m.start(), e, "number")
            return
    if ":" in tok:  # a clock time: only with am/pm
        m = _AMPM_RE.match(t, e)
        if m:
            sc.take(s, m.end(), "date")
        return
    m = _AFTER_NUM_RE.match(t, e)
    if m:
        kind = m.lastgroup
        if kind in ("unit", "zhunit"):
            sc.take(s, m.end(), "number")
        elif kind in ("month", "zhdate") and tok.isdigit():
            sc.take(s, m.end(), "date")


def _grammar(sc: _Scanner, s: int, e: int) -> bool:
    """Match the token ``text[s:e]`` against the grammar; record its tag(s). False if it is not one tag."""
    t = sc.text
    tok = t[s:e]
    sep = "." in tok or "/" in tok or "\\" in tok or "@" in tok
    m = (_GRAMMAR if sep else _GRAMMAR_PLAIN).fullmatch(t, s, e)
    if m is None:
        return False
    g = m.lastgroup
    if g == "ident":
        sc.take(s, e, "identifier")
        if "." in tok:  # openai.APIConnectionError, APIConnectionError.__init__
            for seg in tok.split("."):
                if seg[-1:] in "nrgte" and _EXC_RE.fullmatch(seg):
                    i = t.find(seg, s, e)
                    sc.add(i, i + len(seg), "error")
        if "-" in tok:
            v = _KEBAB_TAIL_RE.search(tok)
            if v:
                k = v.lastgroup
                sc.add(s + v.start(k), s + v.end(k), k)
    elif g == "path":
        if t.startswith("(", m.end("path")):  # "console.log(", "x.json(": a call, not a file
            if _GRAMMAR_IDENT.fullmatch(tok):
                sc.take(s, e, "identifier")
            return True
        sc.take(m.start("path"), m.end("path"), "path")
    elif g in ("error", "date", "hash", "version", "number"):
        sc.take(s, e, g)
    elif g == "win":
        sc.take(s, e, "path")
    elif g in ("ip", "ipport"):
        ip = m.group("ip")
        if all(int(x) <= 255 for x in ip.split(".")):
            sc.take(m.start("ip"), m.end("ip"), "url")
            if m.group("ipport") and _valid_port(m.group("ipport")):
                sc.take(m.start("ipport"), m.end("ipport"), "port")
        else:
            sc.take(s, e, "version")
    elif g in ("domain", "dport", "dpath"):
        dom = m.group("domain")
        if m.group("dpath") is None and m.group("dport") is None and dom[: dom.find(".")] in _CODE_RECEIVERS:
            sc.take(s, e, "identifier")
        else:
            end = m.end("dpath") if m.group("dpath") is not None else m.end("domain")
            sc.take(s, end, "url")
            if m.group("dport") and _valid_port(m.group("dport")):
                sc.add(m.start("dport"), m.end("dport"), "port")
    elif g == "email":
        sc.take(s, e, "url")
    elif g in ("pin", "named"):
        sc.take(m.start(g), m.end(g), "version")
    elif g in ("hport", "lport", "bport", "aport"):
        if _valid_port(m.group(g)):
            sc.take(m.start(g), m.end(g), "port")
    elif g in ("env", "winenv"):
        sc.take(m.start(g), m.end(g), "identifier")
    return True


def _word(sc: _Scanner, s: int, e: int, tok: str) -> None:
    """An all-letters token: a plain word unless it is an errno/signal name, a special file name, a month
    followed by a day/year, or has inner capitals (then: the grammar). ``main()``: see ``_scan_calls``."""
    if tok in _SPECIAL_FILES:
        sc.take(s, e, "path")
    elif tok in _ERRNO_SET:
        sc.take(s, e, "error")
    elif tok in _MONTH_SET:
        m = _DAY_AFTER_MONTH_RE.match(sc.text, e)
        if m:
            sc.take(s, m.end(), "date")
    elif not (tok.islower() or tok.istitle() or tok.isupper()):
        _grammar(sc, s, e)


def _core(t: str, s: int, e: int) -> tuple[int, int]:
    """The part of the token ``t[s:e]`` to tag: without trailing ``.,:;~``, without a leading ``@``
    (decorators) and without a leading ``.`` unless it starts a dot-file name (``.env`` after a space, not
    ``.name`` after ``x()``)."""
    while e > s and t[e - 1] in _TOKEN_TRAIL:
        e -= 1
    if e > s:
        c = t[s]
        if c == "@":
            s += 1
        elif c == "." and s > 0 and t[s - 1] not in _DOTFILE_BEFORE and not t.startswith(("./", "../"), s):
            while s < e and t[s] == ".":
                s += 1
    return s, e


def _token(sc: _Scanner, s: int, e: int, depth: int = 0) -> None:
    """Tag one token; if it is not one tag as a whole, its parts: at "=", ",", ":", ".." (depth 1), then at "/"
    (depth 2)."""
    t = sc.text
    s, e = _core(t, s, e)
    if e <= s:
        return
    tok = t[s:e]
    if tok.isalpha():
        _word(sc, s, e, tok)
        return
    if tok.isdigit():
        _numeric(sc, s, e)
        return
    if _grammar(sc, s, e):
        return
    if _NUMERIC_RE.fullmatch(tok):
        _numeric(sc, s, e)
        return
    if depth == 0 and e - s <= SPLIT_MAX:  # a longer run without spaces is data (base64, minified): not split
        parts = [p.span() for p in _SPLIT_RE.finditer(t, s, e)]
        if len(parts) > 1 or (parts and parts[0] != (s, e)):  # "KEY=value", "name=", ":hash_len"
            for ps, pe in parts:
                _token(sc, ps, pe, 1)
            return
    if depth < 2 and "/" in tok and e - s <= SPLIT_MAX:
        for p in _SLASH_SPLIT_RE.finditer(t, s, e):
            _token(sc, p.start(), p.end(), 2)


def _scan_tokens(sc: _Scanner, any_url: bool) -> None:
    """The token pass. ``findall`` (strings, no match objects) keeps the per-word cost of prose tiny; the few
    tokens that are not plain words are located with ``str.find`` from the previous one."""
    t = sc.text
    n = len(t)
    mask = sc.mask
    special = _SPECIAL_WORDS
    tokchars = _TOKEN_CHARS
    pos = 0
    for tok in _TOKEN_RE.findall(t):
        core = tok.rstrip(_TOKEN_TRAIL) if tok[-1] in _TOKEN_TRAIL else tok
        if not core:
            continue
        # fast path: a plain word (the bulk of prose) is dropped here
        if core.isalpha() and (core.islower() or core.istitle() or core.isupper()) and core not in special:
            continue
        if not core.strip(_PUNCT_ONLY):  # "=", "-", "==", "$", "/": no letter, no digit
            continue
        if len(core) <= 2 and not (core[-1].isdigit() or core[0].isdigit()):  # "-u", "a:", "x=": no tag is this
            continue
        s = t.find(tok, pos)
        while s >= 0 and ((s > 0 and t[s - 1] in tokchars) or (s + len(tok) < n and t[s + len(tok)] in tokchars)):
            s = t.find(tok, s + 1)  # a match inside a longer token: not this one
        if s < 0:  # cannot happen; be safe
            continue
        pos = s + len(tok)
        e = pos
        if any_url:
            c = mask.find(1, s, e)
            if c >= 0:  # the token runs into a URL: keep the part before it ("DATABASE_URL=postgres://...")
                if c == s:
                    continue
                e = c
                while e > s and t[e - 1] in "=:":
                    e -= 1
        _token(sc, s, e)


def _scan_calls(sc: _Scanner) -> None:
    """``name()`` and ``${NAME}`` for names that are plain words (``main()``); others are tagged already."""
    t = sc.text
    if "()" in t:
        i = t.find("()")
        while i >= 0:
            j = i
            while j > 0 and (t[j - 1].isalnum() or t[j - 1] == "_") and t[j - 1].isascii():
                j -= 1
            name = t[j:i]
            if name and name.isalpha() and name not in _BUILTINS and not t.startswith(".", j - 1):
                sc.take(j, i, "identifier")
            i = t.find("()", i + 2)
    if "${" in t:
        i = t.find("${")
        e = -2  # the next "}" after i (-1: none left), found again only once passed
        while i >= 0:
            if e != -1 and e < i:
                e = t.find("}", i)
            name = t[i + 2 : e] if 0 < e <= i + 130 else ""  # a name is short: never a slice to a far "}"
            if name and (name.isalpha() or name.replace("_", "a").isalnum()) and name.isascii():
                sc.take(i + 2, e, "identifier")
            i = t.find("${", i + 2)


def _scan_error_lines(sc: _Scanner) -> None:
    t = sc.text
    if not any(k in t for k in _ERRLINE_TRIGGERS):
        return
    for m in _ERRLINE_RE.finditer(t):
        s = m.start(1)
        e = _strip_trailing(t, s, m.end(1))
        if e - s >= 3:
            sc.add(s, e, "error")  # not claimed: the tags inside the message (a port, a path) stay


def _scan_quoted(sc: _Scanner) -> None:
    t = sc.text
    if not any(q in t for q in _QUOTE_CHARS):
        return
    spans = {(s, e) for s, e, _k, _v in sc.found}
    for m in _QUOTED_RE.finditer(t):
        g = m.lastindex or 1
        s, e = m.start(g), m.end(g)
        inner = t[s:e]
        if inner[0].isspace() or inner[-1].isspace() or not _HAS_WORDCHAR.search(inner):
            continue
        core = inner[:-2] if inner.endswith("()") else inner
        if (s, s + len(core)) in spans:  # the whole inside is already a more specific tag
            continue
        sc.add(s, e, "quoted", inner)


def _collect(text: str) -> list[tuple[int, int, str, str]]:
    sc = _Scanner(text)
    any_url = _scan_urls(sc)
    _scan_tokens(sc, any_url)
    _scan_calls(sc)
    _scan_error_lines(sc)
    _scan_quoted(sc)
    return sc.found


def _unique(found: list[tuple[int, int, str, str]]) -> list[Tag]:
    """One tag per value, at its first appearance, with the most specific kind any occurrence had."""
    found.sort(key=lambda x: (x[0], -x[1]))
    kinds: dict[str, str] = {}
    for _s, _e, kind, value in found:
        have = kinds.get(value)
        if have is None or _PRIORITY[kind] < _PRIORITY[have]:
            kinds[value] = kind
    return [Tag(kind, value) for value, kind in kinds.items()]


def extract_tags(text: str) -> list[Tag]:
    """The lookup hints of ``text``: unique by value, in order of first appearance (see module docstring)."""
    if not text:
        return []
    return _unique(_collect(text))


def _paths_of(prev: str, tok: str, depth: int, out: dict[str, None], call: bool = False) -> None:
    """``_token``'s decisions, paths only (for ``extract_paths``): the token's path if it is one; nothing if it
    is another tag as a whole; else its parts, split as ``_token`` splits them. ``out``: the paths found so far,
    in order (a dict: a membership test per token, not a scan of the list)."""
    if tok in _SPECIAL_FILES:
        out.setdefault(tok)
        return
    m = _GRAMMAR.fullmatch(tok)
    if m is not None:
        g = m.lastgroup
        if g == "path" or g == "win":
            p = m.group(g)
            if not (call and p == tok):  # "console.log(" is a call
                out.setdefault(p)
        return
    if tok.isalpha() or _NUMERIC_RE.fullmatch(tok):
        return
    if depth == 0 and len(tok) <= SPLIT_MAX:
        spans = [x.span() for x in _SPLIT_RE.finditer(tok)]
        if len(spans) > 1 or (spans and spans[0] != (0, len(tok))):
            for ps, pe in spans:
                part_prev, part = _token_core(tok[ps - 1] if ps else prev, tok[ps:pe])
                if part:
                    _paths_of(part_prev, part, 1, out, call and pe == len(tok))
            return
    if depth < 2 and "/" in tok and len(tok) <= SPLIT_MAX:
        for x in _SLASH_SPLIT_RE.finditer(tok):
            ps = x.start()
            part_prev, part = _token_core(tok[ps - 1] if ps else prev, x.group())
            if part:
                _paths_of(part_prev, part, 2, out, call and x.end() == len(tok))


def _token_core(prev: str, tok: str) -> tuple[str, str]:
    """``_core`` for a token given as a string and the character before it: (the character before the core,
    the core)."""
    tok = tok.rstrip(_TOKEN_TRAIL)
    if tok[:1] == "@":
        return "@", tok[1:]
    if tok[:1] == "." and prev and prev not in _DOTFILE_BEFORE and not tok.startswith(("./", "../")):
        return ".", tok.lstrip(".")
    return prev, tok


def extract_paths(text: str) -> list[str]:
    """Only the file paths of ``text``, unique, in order: the same rules as :func:`extract_tags` (URLs are not
    paths), in a leaner pass (no positions, only tokens holding ``.``, ``/`` or ``\\``). Used by ``chunk``.
    Linear in ``text`` and the paths found."""
    if not text:
        return []
    if "://" in text or "www." in text:
        sc = _Scanner(text)
        if _scan_urls(sc):
            chars = list(text)
            for s, e, _k, _v in sc.found:
                chars[s:e] = " " * (e - s)
            text = "".join(chars)
    out: dict[str, None] = {}  # insertion-ordered, unique
    n = len(text)
    tokchars = _TOKEN_CHARS
    pos = 0
    for tok in _TOKEN_RE.findall(text):
        if "/" in tok or "\\" in tok:
            pass
        elif "." in tok:
            # only ".": a path needs a known extension, a leading dot or a part ("x=a.py")
            core = tok.rstrip(_TOKEN_TRAIL).removeprefix("@")  # "@.env": the mention of a dotfile (_token_core)
            if (
                core[:1] != "."
                and "=" not in core
                and ":" not in core
                and "," not in core
                and core.rsplit(".", 1)[-1].lower() not in _EXT_SET
            ):
                continue
        else:
            tok = tok.rstrip(_TOKEN_TRAIL)
            if tok in _SPECIAL_FILES:
                out.setdefault(tok)
            continue
        s = text.find(tok, pos)
        while s >= 0 and ((s > 0 and text[s - 1] in tokchars) or (s + len(tok) < n and text[s + len(tok)] in tokchars)):
            s = text.find(tok, s + 1)
        if s < 0:
            continue
        pos = s + len(tok)
        prev, core = _token_core(text[s - 1] if s else "", tok)
        if core:
            # a call when "(" follows the core itself, as in extract_tags ("x.json(" is a call; "src/a.py:()" a path)
            _paths_of(prev, core, 0, out, text.startswith("(", s + len(tok.rstrip(_TOKEN_TRAIL))))
    return list(out)


# ------------------------------------------------------------------------------------------- normalization
def _word_terms(text: str) -> list[str]:
    """Lowercased word tokens of >= 3 characters that are not stopwords (the query side of plain words)."""
    out = []
    for w in _WORD_RE.findall(text):
        w = w.lower().strip("'")
        if len(w) >= 3 and w not in STOPWORDS:
            out.append(w)
    return out


def _subword_terms(value: str) -> list[str]:
    """Word parts of an identifier-ish value, split at non-alphanumerics and camelCase humps, by the
    ``_word_terms`` rule (lowercased, >= 3 characters, not a stopword)."""
    out = []
    for w in _HUMP_RE.findall(value):
        w = w.lower()
        if len(w) >= 3 and w not in STOPWORDS:
            out.append(w)
    return out


def _tag_terms(kind: str, value: str) -> list[str]:
    """THE normalization of one lookup hint (both sides of the keyword signal go through here)."""
    v = value.strip()
    low = v.lower()
    terms = [low]
    if kind == "path":
        p = low.replace("\\", "/").rstrip("/")
        if p.startswith("./"):
            p = p[2:]
        base = p.rsplit("/", 1)[-1]
        if base and base != low:
            terms.append(base)
        dot = base.rfind(".")
        if dot > 1:  # stems of one character ("x" of x.sh) are not hints
            terms.append(base[:dot])
    elif kind == "url":
        m = _HOST_RE.match(low)
        if m and m.group(1) != low:
            terms.append(m.group(1))
    elif kind == "port":
        terms.extend(("port", "端口"))
    elif kind == "version":
        if low.startswith("v"):
            terms.append(low[1:])
    elif kind == "hash":
        if len(low) > 7 and "-" not in low:
            terms.append(low[:7])
    elif kind == "number":
        terms[0] = _SPACES_RE.sub("", low)
    elif kind in ("identifier", "error", "quoted", "date", "tool"):
        if kind == "quoted":
            terms[0] = _SPACES_RE.sub(" ", low)
        parts = _subword_terms(v)
        if len(parts) > 1 or (parts and parts[0] != low):
            terms.extend(parts)
        if CJK_RUN.search(v):
            terms.extend(bigram_list(v))
    return terms


def _dedupe(items: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for x in items:
        if x and x not in seen:
            seen.add(x)
            out.append(x)
    return out


def hint_terms(tags: list[Tag], extra: Iterable[str] = ()) -> list[str]:
    """Normalized lookup-hint terms of an entry: its tags through ``_tag_terms``, plus ``extra`` (tool names)
    normalized like identifiers. Unique, in order."""
    terms: list[str] = []
    for tag in tags:
        terms.extend(_tag_terms(tag.kind, tag.value))
    for name in extra:
        if name:
            terms.extend(_tag_terms("tool", name))
    return _dedupe(terms)


def query_terms(text: str) -> list[str]:
    """Terms of a query for the keyword signal: ``hint_terms`` of the query's own tags, then its plain words
    outside those tags (lowercased, >= 3 characters, not stopwords), then the CJK bigrams of its CJK runs.
    Unique, in order."""
    if not text:
        return []
    found = _collect(text)
    terms = hint_terms(_unique(list(found)))
    if found:
        chars = list(text)
        for s, e, _k, _v in found:
            chars[s:e] = " " * (e - s)
        text = "".join(chars)
    terms.extend(_word_terms(text))
    terms.extend(bigram_list(text))
    return _dedupe(terms)
