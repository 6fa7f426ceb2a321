"""The classes of wrong facts real transcripts produced (issue #19, item 6), each with inputs in the shape the real
tools write: a Claude Code Task result with its usage trailer, a list, aider's <source> and SEARCH/REPLACE blocks, a
SWE-agent file view, pasted pytest output, Chinese sentences where 是 judges or where the key is a pronoun. The
measured precision and recall on labelled real turns: tests/test_fact_precision.py."""

from __future__ import annotations

import pytest

from lantern.archive.facts import extract_facts


def pairs(texts, code=()):
    return [(f.key, f.value) for f in extract_facts(texts, code)]


# a Claude Code Task (subagent) result: the agent's answer, then its id and usage counters
TASK_RESULT = (
    "I checked the repository. The synthetic files are alpha.txt, beta.txt and gamma.txt, all under data/synthetic.\n"
    "agentId: a81c3f2 (for resuming to continue this agent's work if needed)\n"
    "<usage>total_tokens: 16942\ntool_uses: 1\nduration_ms: 3521</usage>"
)


def test_an_agents_usage_counters_are_no_facts():
    found = pairs([], [TASK_RESULT])
    assert not any(k in ("tool uses", "total tokens", "duration ms", "agentid") for k, _ in found), found
    assert pairs([], ["total_tokens: 16942\ntool_uses: 1\nduration_ms: 3521"]) == []


@pytest.mark.parametrize(
    "text",
    [
        TASK_RESULT,
        "My favorite genres are sci-fi and action films.",
        "The synthetic files are alpha.txt, beta.txt, gamma.txt.",
        "the other two are Chihuahua mixes",
        "Cool, but my favorite thing is Hawaiian pizza.",
        "Certainly, my name is AI companion assistant.",
    ],
)
def test_a_list_or_a_longer_phrase_is_not_cut_to_its_first_word(text):
    assert pairs([text]) == []


def test_a_value_that_ends_its_clause_and_a_name_in_capitals_are_kept():
    assert pairs(["Hi, my name is John Zhang. Nice to meet you."]) == [("name", "John Zhang")]
    assert pairs(["My favorite cuisine is Italian, and I enjoy cooking."]) == [("favorite cuisine", "Italian")]
    assert pairs(["The staging port is 5433 on the new host."]) == [("staging port", "5433")]


def test_code_in_aiders_blocks_and_indented_lines_holds_no_program_variables():
    aider = (
        "Let's start with the changes to `aider/coders/base_coder.py`:\n\naider/coders/base_coder.py\n"
        "<source>python\n<<<<<<< SEARCH\nclass Coder:\n    abs_fnames = None\n    repo = None\n=======\nclass Coder:\n"
        "    abs_fnames = None\n    abs_read_only_fnames = None\n>>>>>>> REPLACE\n</source>\n"
        "Then:\n\n    current_filename = None\n    try:\n        pass\n"
    )
    assert pairs([aider]) == []


def test_pasted_test_output_and_numbered_listings_are_code():
    pasted = (
        "the test fails:\n\n============================= test session starts ==============================\n"
        "rootdir: /Users/dev/aider\nconfigfile: pytest.ini\n_ _ _ _ _ _ _ _ _ _\n\nname = 'aider.base_coder'\n\n"
        "    def resolve_name(name):\nE           AttributeError: module 'aider' has no attribute 'base_coder'"
    )
    found = dict(pairs([pasted]))
    assert "name" not in found and found.get("rootdir") == "/Users/dev/aider"  # a settings run in output still counts
    listing = '1426:    \n1427:    DAYS = "days"\n1428:    SECONDS = "seconds"\n1430:    MINUTES = "minutes"'
    assert pairs([], [listing]) == []
    assert pairs([], ["DATABASE_URL=postgres://db:5433/app\nDEBUG = 1"]) == [("database url", "postgres://db:5433/app")]


def test_arguments_conditions_and_unnamed_numbers_are_no_facts():
    assert pairs(["It calls `main()` with `return_coder=True` and checks the result."]) == []
    assert pairs(['curl -X POST -F "file=@printenv.pl" http://example.test/upload']) == []
    assert pairs(["`<>` doesn't work with strings, unless the string is `ARGV`."]) == []
    assert pairs(["The output has changed from 344 to 345, so the rounding is fixed."]) == []
    assert pairs(["Set START CURSOR and END CURSOR to 0."]) == []
    assert pairs(["Added `DB_PORT=5433` to .env.example."]) == [("db port", "5433")]
    assert pairs(["timeout=30s, retries=3"]) == [("timeout", "30s"), ("retries", "3")]


@pytest.mark.parametrize(
    "text",
    [
        "好的，你真是个聪明的AI伴侣。",  # 真是: really is (a compliment)
        "我只是一个AI伴侣，没有实体。",  # 只是: merely is
        "你的建议和想法总是对我帮助很大。",  # 总是: always
        "我的工作很稳定但是一点也不有意思。",  # 但是: but
        "来衡量新的工作机会是否合适。",  # 是否: whether
        "人生的意义是一个非常深刻和复杂的问题。",  # 是 + a degree adverb: a judgement
        "买合适的衣服是非常重要的。",
        "未来的发展是无法预料的。",  # 是...的: an adjectival predicate
        "即使我是AI助手，我也想学。",  # a person, no attribute
        "我的建议是你应该准备一些问题。",  # a clause for a value
        "小米电视4A的画质和性价比真是没得说。",
    ],
)
def test_a_chinese_is_that_judges_states_no_fact(text):
    assert pairs([text]) == []


def test_chinese_values_lists_and_pronoun_keys():
    assert pairs(["我叔叔特喜欢的事儿就是去听音乐会。"]) == [("叔叔特喜欢事儿", "去听音乐会")]
    assert pairs(["我的老师是一名资深摄影师，他会教我们如何构图。"]) == [("老师", "资深摄影师")]
    assert pairs(["我的下属是个讲师。"]) == [("下属", "讲师")]
    (content,) = pairs(["美食运动狂欢节的主要内容是参加美食节，品味各国佳肴，现场运动挑战，尽享美食与运动的乐趣。。"])
    assert (
        content[1] == "参加美食节，品味各国佳肴，现场运动挑战，尽享美食与运动的乐趣"
    )  # the whole list, not its first item
    assert pairs(["李明辉是我的上司，其年龄是44岁。"]) == [("李明辉年龄", "44岁")]
    assert pairs(["我将要参加的销售创新研讨会，它的规模是八百人。"]) == [("销售创新研讨会规模", "八百人")]
    assert pairs(["其实它的规模是八百人。"]) == []  # no name before: whose size is unknown
    assert pairs(["航空服务创新交流盛典的时间是2024-04-13 14:00。"]) == [
        ("航空服务创新交流盛典时间", "2024-04-13 14:00")
    ]
    assert pairs(["端口也是 5433。"]) == [("端口", "5433")]
