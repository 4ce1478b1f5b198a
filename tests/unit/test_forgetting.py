"""Forgetting's verdicts: off by default, thresholds, protections."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from services.core.domain.forgetting import ForgetPolicy, Verdict, protection, verdict
from services.core.settings import Settings

NOW = datetime(2026, 6, 1, tzinfo=UTC)
ON = ForgetPolicy(archive_below=0.2, delete_below=0.05)


def judge(policy: ForgetPolicy = ON, **overrides) -> Verdict:
    values = dict(
        type="Context",
        importance=0.3,
        timestamp=NOW - timedelta(days=365),
        relevance_score=0.1,
        archived=False,
        now=NOW,
        policy=policy,
    )
    values.update(overrides)
    return verdict(**values)


def test_forgetting_is_off_by_default():
    assert not ForgetPolicy().enabled
    assert judge(ForgetPolicy(), relevance_score=0.0) is Verdict.KEEP


def test_below_archive_archives_below_delete_deletes_above_keeps():
    assert judge(relevance_score=0.1) is Verdict.ARCHIVE
    assert judge(relevance_score=0.01) is Verdict.DELETE
    assert judge(relevance_score=0.2) is Verdict.KEEP  # the threshold itself is kept
    assert judge(relevance_score=None) is Verdict.KEEP  # never scored


def test_each_threshold_alone_and_an_archived_memory():
    assert judge(ForgetPolicy(archive_below=0.2), relevance_score=0.0) is Verdict.ARCHIVE
    assert judge(ForgetPolicy(delete_below=0.05), relevance_score=0.1) is Verdict.KEEP
    assert judge(ForgetPolicy(delete_below=0.05), relevance_score=0.01) is Verdict.DELETE
    assert judge(archived=True, relevance_score=0.1) is Verdict.KEEP  # already archived
    assert judge(archived=True, relevance_score=0.01) is Verdict.DELETE


def test_protected_memories_are_never_forgotten():
    assert judge(importance=0.7, relevance_score=0.0) is Verdict.KEEP
    assert judge(timestamp=NOW - timedelta(days=89), relevance_score=0.0) is Verdict.KEEP
    assert judge(timestamp=NOW - timedelta(days=91), relevance_score=0.0) is Verdict.DELETE
    for kind in ("Decision", "Insight"):
        assert judge(type=kind, relevance_score=0.0) is Verdict.KEEP
    custom = ForgetPolicy(archive_below=0.2, protect_importance=0.95, protect_days=0, protected_types=frozenset())
    assert judge(custom, type="Decision", importance=0.9, timestamp=NOW) is Verdict.ARCHIVE


def test_protection_names_its_reason():
    base = dict(now=NOW, policy=ON)
    assert protection(type="Context", importance=0.8, timestamp=NOW, **base) == "importance"
    assert protection(type="Context", importance=0.1, timestamp=NOW, **base) == "young"
    old = NOW - timedelta(days=400)
    assert protection(type="Insight", importance=0.1, timestamp=old, **base) == "type"
    assert protection(type="Context", importance=0.1, timestamp=old, **base) is None


def test_the_policy_comes_from_settings_and_deleting_above_archiving_is_refused():
    settings = Settings(
        _env_file=None,
        consolidation_forget_archive_threshold=0.2,
        consolidation_forget_delete_threshold=0.05,
        consolidation_forget_protected_types=["Decision"],
    )
    policy = settings.consolidation.forget_policy
    assert policy.enabled and (policy.archive_below, policy.delete_below) == (0.2, 0.05)
    assert policy.protected_types == frozenset({"Decision"}) and policy.protect_days == 90
    assert not Settings(_env_file=None).consolidation.forget_policy.enabled
    with pytest.raises(ValidationError, match="CONSOLIDATION_FORGET_DELETE_THRESHOLD"):
        Settings(_env_file=None, consolidation_forget_archive_threshold=0.1, consolidation_forget_delete_threshold=0.3)
