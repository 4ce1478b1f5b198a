"""The audit log's pure rules: the entry's content for any event kind, the
record hash and diff, sealing, and verify naming the first broken entry."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime

from services.core.actor import acting_as, current_actor
from services.core.domain.audit import (
    GENESIS,
    AuditEntry,
    entry_record,
    field_diff,
    record_hash,
    seal,
    verify,
    with_before_hashes,
)
from services.core.domain.model import EventKind, Memory, MemoryEvent, Relation

T0 = datetime(2025, 1, 15, 10, 30, tzinfo=UTC)


def memory(**fields) -> Memory:
    values = dict(
        id="m1", tenant="acme", content="Chose PostgreSQL", type="Decision", confidence=0.9, importance=0.5,
        timestamp=T0, t_valid=T0, updated_at=T0, last_accessed=T0, recorded_at=T0, tags=["db"],
    )  # fmt: skip
    values.update(fields)
    return Memory(**values)


def log(n: int, tenant: str = "acme") -> list[AuditEntry]:
    """n sealed entries."""
    entries = [
        AuditEntry(tenant, i, 1000 + i, f"e{i}", json.dumps({"kind": "created", "n": i})) for i in range(1, n + 1)
    ]
    seals = {s.seq: s for s in seal(GENESIS, entries)}
    return [replace(e, content_hash=seals[e.seq].content_hash, chain_hash=seals[e.seq].chain_hash) for e in entries]


def test_the_record_hash_moves_with_content_but_not_with_reads_or_decay():
    base = memory()
    assert record_hash(base) == record_hash(memory())
    assert record_hash(base) != record_hash(replace(base, content="Chose MySQL"))
    assert record_hash(base) == record_hash(replace(base, last_accessed=datetime(2026, 1, 1, tzinfo=UTC)))
    assert record_hash(base) == record_hash(replace(base, relevance_score=0.1, embedding=[1.0, 0.0]))
    assert record_hash(None) == ""


def test_the_diff_names_each_changed_field_with_both_values():
    before = memory()
    after = replace(before, importance=0.9, tags=["db", "sql"], updated_at=datetime(2026, 1, 1, tzinfo=UTC))
    assert field_diff(before, after) == {"importance": [0.5, 0.9], "tags": [["db"], ["db", "sql"]]}
    assert field_diff(None, after) == {}


def test_the_entry_covers_any_event_kind_generically():
    relation = Relation("m1", "m2", "RELATES_TO", 0.5, T0)
    for kind in EventKind:
        event = MemoryEvent("e", "acme", kind, "m1", 3, T0, relation=relation)
        record = json.loads(entry_record(event, "ci-bot"))
        assert (record["kind"], record["memory_id"], record["actor"], record["version"]) == (
            kind.value,
            "m1",
            "ci-bot",
            3,
        )
        assert record["detail"]["relation"]["target"] == "m2"
    forced = replace(MemoryEvent("e", "acme", EventKind.CREATED, "m1", 1, T0), forced=True, tombstone_id="t1")
    assert json.loads(entry_record(forced, "x"))["detail"] == {"forced": True, "tombstone_id": "t1"}
    assert json.loads(entry_record(MemoryEvent("e", "acme", EventKind.CREATED, "m1", 1, T0), "x"))["detail"] == {}
    update = MemoryEvent.for_memory(EventKind.UPDATED, memory(version=2, content="new"), T0, content_changed=True)
    record = json.loads(entry_record(update, "x", before=memory(), after=memory(version=2, content="new")))
    assert record["diff"] == {"content": ["Chose PostgreSQL", "new"]} and record["detail"]["content_changed"]
    assert record["before_hash"] == record_hash(memory()) and record["after_hash"] != record["before_hash"]


def test_the_actor_is_the_context_s_and_reset_after():
    assert current_actor() == "system"
    with acting_as("ci-bot"):
        assert current_actor() == "ci-bot"
    assert current_actor() == "system"


def test_an_intact_log_verifies():
    check = verify(log(5), last_seq=5)
    assert check.ok and check.checked == 5 and check.sealed_through == 5


def test_an_edited_entry_is_named():
    entries = log(5)
    entries[2] = replace(entries[2], record=entries[2].record.replace("created", "deleted"))
    check = verify(entries, 5)
    assert check.broken_seq == 3 and "edited" in check.reason and check.sealed_through == 2


def test_a_removed_entry_and_a_removed_last_entry_are_named():
    entries = log(5)
    assert verify(entries[:1] + entries[2:], 5).broken_seq == 2
    assert verify(entries[:4], 5).broken_seq == 5
    assert verify([], 2).broken_seq == 1


def test_a_resealed_edit_breaks_the_chain_after_it():
    """Editing an entry and recomputing its own hashes from scratch still
    leaves the next entry's chain pointing at the old value."""
    entries = log(4)
    edited = replace(entries[1], record='{"kind":"forged"}')
    [forged] = seal(entries[0].chain_hash, [edited])
    entries[1] = replace(edited, content_hash=forged.content_hash, chain_hash=forged.chain_hash)
    check = verify(entries, 4)
    assert check.broken_seq == 3 and "chain" in check.reason


def test_the_unsealed_tail_is_checked_for_gaps_only():
    entries = log(3) + [AuditEntry("acme", 4, 1, "e4", "{}"), AuditEntry("acme", 5, 1, "e5", "{}")]
    check = verify(entries, 5)
    assert check.ok and check.sealed_through == 3 and check.checked == 5
    assert verify(entries[:3] + entries[4:], 5).broken_seq == 4


def test_history_fills_a_before_hash_the_writer_did_not_know():
    shown = with_before_hashes(
        [
            {"kind": "created", "before_hash": "", "after_hash": "h1"},
            {"kind": "associated", "before_hash": "", "after_hash": ""},
            {"kind": "deleted", "before_hash": "", "after_hash": ""},
        ]
    )
    assert [e["before_hash"] for e in shown] == ["", "h1", "h1"]


def test_the_record_hash_and_entry_text_are_pinned():
    """What earlier releases wrote: a faster encoding must hash and write the same text."""
    full = memory(
        tags=["db", "Ünïcode"],
        tag_prefixes=["db"],
        metadata={"b": 1, "a": [1.5, "x"]},
        summary="s",
        t_invalid=datetime(2026, 2, 1, tzinfo=UTC),
        factuality={"label": "fact", "confidence": 0.8},
        trust_state="pending_review",
        review_rule="low_confidence",
        archived=True,
        version=3,
    )
    assert record_hash(memory()) == "90e2d04f0494baf95e156af86ccc4479a18a4e98d368f08c55ed7bc7e984d50c"
    assert record_hash(full) == "9268da380e9000b8223382cf0701c72e9a2e74fd27f32f93c151af5c13057747"
    update = MemoryEvent.for_memory(EventKind.UPDATED, full, T0, content_changed=True)
    assert entry_record(update, "ci-bot", before=memory(), after=full) == (
        '{"actor":"ci-bot","after_hash":"9268da380e9000b8223382cf0701c72e9a2e74fd27f32f93c151af5c13057747",'
        '"before_hash":"90e2d04f0494baf95e156af86ccc4479a18a4e98d368f08c55ed7bc7e984d50c",'
        '"detail":{"content_changed":true,"trust_state":"pending_review"},'
        '"diff":{"archived":[false,true],"factuality":[null,{"confidence":0.8,"label":"fact"}],'
        '"metadata":[{},{"a":[1.5,"x"],"b":1}],"review_rule":["","low_confidence"],"summary":["","s"],'
        '"t_invalid":[null,1769904000000000],"tags":[["db"],["db","Ünïcode"]],'
        '"trust_state":["active","pending_review"]},"kind":"updated","memory_id":"m1","version":3}'
    )
