"""The events table (services/core/domain/event_consumers.py) is where each service's
subscriptions come from: every consumer a bootstrap builds takes the kinds its entry names."""

from __future__ import annotations

import pytest

from services.consolidate import bootstrap as consolidate
from services.core.adapters.nats_bus import event_subject, kind_filters
from services.core.adapters.nats_consumer import JetStreamConsumer
from services.core.domain.event_consumers import EVENT_CONSUMERS, PROJECTION, consumers_of
from services.core.domain.model import EventKind
from services.enrich import bootstrap as enrich
from services.ingest import bootstrap as ingest
from services.recall import bootstrap as recall
from tests.unit.test_projector_subjects import matches
from tests.unit.test_settings_groups import loaded


def _consumers(app) -> list[JetStreamConsumer]:
    """The event consumers an app starts or stops (each one is stopped at shutdown)."""
    steps = [*app.startups, *app.shutdowns]
    found = {id(s.__self__): s.__self__ for s in steps if isinstance(getattr(s, "__self__", None), JetStreamConsumer)}
    return list(found.values())


@pytest.mark.parametrize("bootstrap", [ingest, recall, enrich, consolidate], ids=lambda b: b.__name__.split(".")[1])
def test_each_bootstraps_subscriptions_are_its_entries_in_the_table(bootstrap, tmp_path):
    service = bootstrap.__name__.split(".")[1]
    settings = loaded(bootstrap.GROUPS, tmp_path)
    prefix = settings.bus.nats_subject_prefix
    subscribed = sorted(c.spec.filter_subjects for c in _consumers(bootstrap.build_app(settings)))
    assert subscribed == sorted(kind_filters(prefix, c.kinds) for c in consumers_of(service))


def test_the_table_names_each_consumer_once_and_only_services_that_exist():
    names = [c.name for c in EVENT_CONSUMERS]
    assert len(names) == len(set(names))
    assert {c.service for c in EVENT_CONSUMERS} <= {"ingest", "recall", "enrich", "consolidate"}
    assert all(c.kinds and c.kinds <= set(EventKind) for c in EVENT_CONSUMERS)


def test_a_filter_matches_the_subjects_the_bus_publishes_its_kinds_to():
    filters = kind_filters("memory.events", PROJECTION.kinds)
    for kind in EventKind:
        published = event_subject("memory.events", "tenant-1", kind.value)
        assert any(matches(f, published) for f in filters) == PROJECTION.takes(kind)
