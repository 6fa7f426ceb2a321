"""A URL in Chinese or Japanese text ends where the sentence's punctuation starts (issue 37, item 5): CJK writing
puts no space after a URL, so a tag that ran to the next space took "，请看。" and the words after it into the URL.
Generated URLs (ASCII paths, queries, IRIs with ideographs in the path) followed by any CJK or fullwidth punctuation
and more text: the url tag is the URL exactly; before a space or an ASCII delimiter, as it always was."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples
from lantern.text.tags import extract_tags

PUNCT = list("、。，：；！？（）「」『』【】《》〈〉〔〕…“”‘’～")
PATH = st.text(alphabet=st.sampled_from(list("abcxyz019-_.~/%=&?") + list("路径页面文档")), min_size=0, max_size=20)
HOST = st.from_regex(r"[a-z]{1,8}(\.[a-z]{2,6}){1,2}", fullmatch=True)
TAIL = st.text(alphabet=st.sampled_from(list("请看然后数据库端口是") + PUNCT), min_size=0, max_size=10)


def _urls(text: str) -> list[str]:
    return [t.value for t in extract_tags(text) if t.kind == "url"]


@settings(max_examples=examples(300), deadline=None)
@given(
    scheme=st.sampled_from(["https", "http", "postgres"]), host=HOST, path=PATH, stop=st.sampled_from(PUNCT), tail=TAIL
)
def test_a_url_ends_at_cjk_punctuation(scheme, host, path, stop, tail):
    url = f"{scheme}://{host}/{path}".rstrip(".?&=%~-_/") or f"{scheme}://{host}"
    assert _urls(f"文档在{url}{stop}{tail}") == [url]


@settings(max_examples=examples(100), deadline=None)
@given(host=HOST, path=st.text(alphabet=st.sampled_from(list("abc019-_")), max_size=12), stop=st.sampled_from(PUNCT))
def test_a_www_url_ends_at_cjk_punctuation(host, path, stop):
    url = f"www.{host}/{path}" if path else f"www.{host}"
    assert _urls(f"见 {url}{stop}然后") == [url]


def test_ideographs_in_a_path_stay_in_the_url_and_ascii_text_is_unchanged():
    assert _urls("网址 https://zh.example.org/wiki/北京、上海") == ["https://zh.example.org/wiki/北京"]
    assert _urls("see https://x.org/a?b=1&c=2 then") == ["https://x.org/a?b=1&c=2"]
    assert _urls("(https://x.org/a), and") == ["https://x.org/a"]
