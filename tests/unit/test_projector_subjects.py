"""The subjects recall's projector consumes: consolidation's unprojected kinds are filtered at the bus."""

from __future__ import annotations

from services.core.adapters.nats_bus import event_subject, kind_filters
from services.core.domain.event_consumers import PROJECTION
from services.core.domain.model import EventKind


def projected_subjects(prefix: str) -> list[str]:
    """The projector's subscription, as recall's bootstrap builds it (subscription_spec)."""
    return kind_filters(prefix, PROJECTION.kinds)


def test_the_projector_listens_to_every_kind_but_decayed_and_clustered():
    subjects = projected_subjects("memory.events")
    kinds = {subject.rsplit(".", 1)[1] for subject in subjects}
    assert EventKind.DECAYED.value not in kinds and EventKind.CLUSTERED.value not in kinds
    for kind in (EventKind.CREATED, EventKind.UPDATED, EventKind.DELETED, EventKind.ARCHIVED, EventKind.RESTORED):
        assert f"memory.events.*.{kind.value}" in subjects
    # The filters match the subjects the bus publishes to (<prefix>.<tenant>.<kind>, '*' one token).
    assert any(matches(f, event_subject("memory.events", "acme.eu", "created")) for f in subjects)
    assert not any(matches(f, event_subject("memory.events", "acme", "decayed")) for f in subjects)


def matches(pattern: str, subject: str) -> bool:
    """NATS subject matching with '*' (one token) only."""
    wanted, got = pattern.split("."), subject.split(".")
    return len(wanted) == len(got) and all(w in ("*", g) for w, g in zip(wanted, got, strict=True))
