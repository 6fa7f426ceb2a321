"""``lantern eval DATASET --data PATH`` given a file of the wrong kind, or data that yields no history: one error
line naming the file and the dataset, exit 1, no report (newcomer finding: ``eval aider --data locomo10.json``
wrote a report of "0 lost facts; 0.0%" and exited 0; ``eval locomo --data chat-history.md`` said only "error:
Expecting value: line 1 column 1 (char 0)")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clirun import lantern

FIX = Path(__file__).parent / "fixtures" / "eval"
DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
LOCOMO, MEMDAILY, AIDER, JSONL = FIX / "locomo_mini.json", FIX / "memdaily", FIX / "aider_mini.md", FIX / "facts.jsonl"


def eval_cli(tmp_path: Path, dataset: str, data: Path, *extra: str) -> tuple[int, list[str], Path]:
    """``lantern eval DATASET --data DATA ...`` in-process (tests/clirun.py): exit code, stderr lines, --out."""
    out = tmp_path / "out"
    proc = lantern(
        "eval",
        dataset,
        "--data",
        str(data),
        "--out",
        str(out),
        "--limit",
        "1",
        "--budgets",
        "",
        "--ratios",
        "",
        "--no-plots",
        *extra,
        columns=200,
        env={"LANTERN_EVAL_CACHE": str(tmp_path / "cache")},
    )
    return proc.returncode, proc.stderr.decode().strip().splitlines(), out


def memdaily_file() -> Path:
    return sorted(MEMDAILY.glob("*.json"))[0]


@pytest.mark.parametrize(
    "dataset, data, expected",
    [
        ("aider", LOCOMO, f"no aider sessions found in {LOCOMO}: is --data the file for dataset 'aider'?"),
        ("aider", MEMDAILY, f"no aider sessions found in {MEMDAILY}: is --data the folder for dataset 'aider'?"),
        ("locomo", AIDER, f"{AIDER} is not LoCoMo JSON (line 2: Expecting value)"),
        ("locomo", JSONL, f"{JSONL} is not LoCoMo JSON (line 2: Extra data)"),
        (
            "locomo",
            memdaily_file(),
            f"no LoCoMo conversations found in {memdaily_file()}: is --data the file for dataset 'locomo'?",
        ),
        ("memdaily", LOCOMO, f"{LOCOMO} is not MemDaily JSON (no trajectory with a message_list)"),
        ("memdaily", AIDER, f"{AIDER} is not MemDaily JSON (line 2: Expecting value)"),
        ("memdaily", FIX, f"{LOCOMO} is not MemDaily JSON (no trajectory with a message_list)"),  # a folder: the file
        ("jsonl", LOCOMO, f"{LOCOMO} is not a JSONL fact set (line 1: Expecting value)"),
        ("jsonl", AIDER, f"{AIDER} is not a JSONL fact set (line 2: Expecting value)"),
    ],
)
def test_a_file_of_another_dataset_is_one_error_line_naming_it(tmp_path, dataset, data, expected):
    code, err, out = eval_cli(tmp_path, dataset, data)
    assert (code, err) == (1, [f"error: {expected}"])
    assert not out.exists()  # no report, not even the folder


def test_data_of_the_right_format_that_yields_no_history_is_an_error(tmp_path):
    """Well-formed files that hold no conversation, a JSON value that is not an array of samples, an aider log whose
    sessions are too short to compact, a split that holds no history: each an error line, no report."""
    empty = tmp_path / "empty.json"
    empty.write_text("[]")
    obj = tmp_path / "object.json"
    obj.write_text('{"sample_id": "x"}')
    lines = tmp_path / "lines.jsonl"
    lines.write_text('{"id": "a", "messages": []}\n[1, 2]\n')
    no_messages = tmp_path / "no-messages.jsonl"
    no_messages.write_text('{"id": "a", "messages": [], "facts": []}\n')
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# notes\n")
    short = tmp_path / "short.md"
    short.write_text("# aider chat started at 2024-08-05 19:33:02\n\n#### hello  \n\nHi.\n\n#### bye  \n\nBye.\n")
    cases = [
        ("locomo", empty, f"no LoCoMo conversations found in {empty}: is --data the file for dataset 'locomo'?"),
        ("locomo", obj, f"{obj} is not LoCoMo JSON (it holds an object, not an array of samples)"),
        ("memdaily", empty, f"{empty} is not MemDaily JSON (no trajectory with a message_list)"),
        (
            "memdaily",
            folder,
            f"no MemDaily files (*.json) found in {folder}: is --data the folder for dataset 'memdaily'?",
        ),
        ("jsonl", lines, f"{lines} is not a JSONL fact set (line 2 holds an array, not a history object)"),
        (
            "jsonl",
            no_messages,
            f"no histories with messages found in {no_messages}: is --data the file for dataset 'jsonl'?",
        ),
        (
            "aider",
            short,
            f"no aider session in {short} is long enough to compact: a look-ahead fact set needs 8 turns, "
            "its only session has 2",
        ),
        (
            "locomo",
            LOCOMO,
            f"no history of {LOCOMO} is in the report split (its locomo histories: 2 tune): use --split "
            "all or --split tune",
        ),
    ]
    for dataset, data, expected in cases:
        code, err, out = eval_cli(tmp_path, dataset, data)
        assert (code, err) == (1, [f"error: {expected}"]), (dataset, data)
        assert not out.exists()


def test_the_loaders_raise_dataset_errors_that_are_value_errors(tmp_path):
    from lantern.eval.datasets import DatasetError, load

    binary = tmp_path / "binary.json"
    binary.write_bytes(b'["\xff\xfe"]')
    with pytest.raises(DatasetError, match=r"binary.json is not LoCoMo JSON \(not UTF-8 text: byte 2\)$"):
        load("locomo", binary)
    assert issubclass(DatasetError, ValueError)
    assert load("jsonl", JSONL).histories  # the right files still load
    assert json.loads(LOCOMO.read_text()) and load("locomo", LOCOMO).histories


@pytest.mark.skipif(not (DATA / "locomo" / "locomo10.json").exists(), reason="../shared/data not present")
def test_the_newcomers_two_commands_on_the_real_data(tmp_path):
    locomo, aider = DATA / "locomo" / "locomo10.json", DATA / "aider_chat_history" / "chat-history.md"
    assert eval_cli(tmp_path, "aider", locomo)[:2] == (
        1,
        [f"error: no aider sessions found in {locomo}: is --data the file for dataset 'aider'?"],
    )
    assert eval_cli(tmp_path, "locomo", aider)[:2] == (
        1,
        [f"error: {aider} is not LoCoMo JSON (line 1: Expecting value)"],
    )
    assert not (tmp_path / "out").exists()
