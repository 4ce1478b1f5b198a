"""The import's keys, input reading and state file, and the CLI's exit codes; no server."""

from __future__ import annotations

import json

import pytest

from cli.client import CliError, exit_code_for
from cli.importer import (
    ImportState,
    detect_format,
    draft_of,
    item_key,
    read_items,
    read_state,
    state_path,
    write_state,
)
from cli.main import run


def test_an_item_key_is_its_own_or_a_digest_of_what_it_stores():
    item = {"id": "m-1", "content": "x", "tags": ["a"], "tenant": "acme", "version": 3, "state": "current"}
    assert item_key({**item, "idempotency_key": "mine"}) == "mine"
    # What the server sets (tenant, version, state) does not change the key; the id and the content do.
    assert item_key(item) == item_key({**item, "tenant": "other", "version": 9, "state": "archived"})
    assert item_key(item) != item_key({**item, "id": "m-2"})
    assert item_key(item) != item_key({**item, "content": "y"})
    with pytest.raises(CliError):
        item_key({"content": "x", "idempotency_key": 7})


def test_a_draft_keeps_only_what_a_new_memory_takes():
    memory = {"id": "m", "content": "c", "tenant": "t", "tags": ["x"], "summary": None, "t_valid": None,
              "metadata": {"k": 1}, "recorded_at": "2026-01-01T00:00:00+00:00"}  # fmt: skip
    assert draft_of(memory) == {"content": "c", "tags": ["x"], "metadata": {"k": 1}}


def test_inputs_are_read_by_their_format(tmp_path):
    lines = tmp_path / "in.jsonl"
    lines.write_text('{"content": "a"}\n\n{"content": "b"}\n')
    assert [i["content"] for i in read_items(lines, detect_format(lines, None))] == ["a", "b"]
    listed = tmp_path / "in.json"
    listed.write_text(json.dumps({"memories": [{"content": "a"}]}))
    assert read_items(listed, detect_format(listed, None)) == [{"content": "a"}]
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"content": "a"}\n{"content": \n')
    with pytest.raises(CliError, match=r"broken.jsonl:2"):
        read_items(broken, "jsonl")
    not_objects = tmp_path / "numbers.jsonl"
    not_objects.write_text("[1]\n")
    with pytest.raises(CliError, match="JSON object"):
        read_items(not_objects, "jsonl")


def test_the_state_file_round_trips_and_a_foreign_one_is_ignored(tmp_path):
    source = tmp_path / "in.jsonl"
    state = ImportState(str(source), "ab" * 32, 250, offset=500, stored=400, replayed=100)
    write_state(state_path(source), state)
    assert read_state(state_path(source)) == state
    state_path(source).write_text('{"version": 99}')
    assert read_state(state_path(source)) is None


@pytest.mark.parametrize(
    ("status", "code"), [(400, 1), (401, 3), (403, 3), (404, 2), (409, 4), (413, 1), (429, 6), (500, 5), (503, 5)]
)
def test_http_statuses_map_to_the_documented_exit_codes(status, code):
    assert exit_code_for(status) == code


def test_usage_errors_exit_1_and_help_exits_0(capsys):
    assert run(["--help"]) == 0
    assert run(["store"]) == 1
    assert run(["no-such-command"]) == 1
    assert run(["import", "--batch-size", "0", "x.jsonl"]) == 1
    assert run(["--url", "http://127.0.0.1:9", "--token", "t", "import", "/nonexistent.jsonl"]) == 1
    assert "no such file" in capsys.readouterr().err
