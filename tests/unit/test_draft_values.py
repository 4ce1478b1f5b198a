"""A draft's Value fields read as protobuf's MessageToDict reads them (tags read directly when strings)."""

from __future__ import annotations

import pytest
from google.protobuf import json_format, struct_pb2

from memgrid.v1 import memory_pb2
from services.core.codec import draft_from_pb


@pytest.mark.parametrize("tags", [["a", "b:c"], [], ["a", 1], [["nested"]], "one", 3, None, {"a": 1}, [True]])
def test_tags_come_out_as_message_to_dict_makes_them(tags):
    draft = memory_pb2.MemoryDraft(content="c")
    draft.tags.CopyFrom(json_format.ParseDict(tags, struct_pb2.Value()))
    assert draft_from_pb(draft).tags == json_format.MessageToDict(draft.tags)


def test_tags_not_sent_are_none():
    assert draft_from_pb(memory_pb2.MemoryDraft(content="c")).tags is None
