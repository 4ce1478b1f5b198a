"""The events table (services/core/domain/event_consumers.py) is where each service's
subscriptions come from: every consumer a bootstrap builds takes the kinds its entry names."""

from __future__ import annotations

import pytest

from services.consolidate import bootstrap as consolidate
from services.core.adapters.nats_bus import event_subject, kind_filters
from services.core.adapters.nats_consumer import JetStreamConsumer
from services.core.domain.event_consumers import EVENT_CONSUMERS, PROJECTION, consumers_of
from services.core.domain.model import EventKind
from services.core.settings import GROUPS, Settings
from services.enrich import bootstrap as enrich
from services.ingest import bootstrap as ingest
from services.recall import bootstrap as recall

#: Fast stand-ins, so building a service loads no model.
FAST = {
    "embedding_provider": "placeholder",
    "enrichment_spacy_blank": True,
    "enrichment_entity_process": False,
    "service_claim_key": "c" * 32,
    "backup_signing_key": "b" * 32,
}
PREFIX = "acme.events"


def _settings(bootstrap, tmp_path) -> Settings:
    values = {key: value for key, value in FAST.items() if key in _fields(bootstrap.GROUPS)}
    return Settings.load(
        *bootstrap.GROUPS, _env_file=None, memgrid_data_dir=tmp_path, nats_subject_prefix=PREFIX, **values
    )


def _fields(groups) -> set[str]:
    return {name for group in groups for name in GROUPS[group].model_fields}


def _consumers(app) -> list[JetStreamConsumer]:
    """The event consumers an app starts or stops (each one is stopped at shutdown)."""
    steps = [*app.startups, *app.shutdowns]
    found = {id(s.__self__): s.__self__ for s in steps if isinstance(getattr(s, "__self__", None), JetStreamConsumer)}
    return list(found.values())


@pytest.mark.parametrize("bootstrap", [ingest, recall, enrich, consolidate], ids=lambda b: b.__name__.split(".")[1])
def test_each_bootstraps_subscriptions_are_its_entries_in_the_table(bootstrap, tmp_path):
    service = bootstrap.__name__.split(".")[1]
    app = bootstrap.build_app(_settings(bootstrap, tmp_path))
    subscribed = sorted(c.spec.filter_subjects for c in _consumers(app))
    assert subscribed == sorted(kind_filters(PREFIX, c.kinds) for c in consumers_of(service))


def test_the_table_names_each_consumer_once_and_only_services_that_exist():
    names = [c.name for c in EVENT_CONSUMERS]
    assert len(names) == len(set(names))
    assert {c.service for c in EVENT_CONSUMERS} <= {"ingest", "recall", "enrich", "consolidate"}
    assert all(c.kinds and c.kinds <= set(EventKind) for c in EVENT_CONSUMERS)


def test_a_filter_matches_the_subjects_the_bus_publishes_its_kinds_to():
    filters = kind_filters(PREFIX, PROJECTION.kinds)
    for kind in EventKind:
        published = event_subject(PREFIX, "tenant-1", kind.value)
        assert any(_matches(f, published) for f in filters) == PROJECTION.takes(kind)


def _matches(pattern: str, subject: str) -> bool:
    """NATS subject matching with '*' (one token) only."""
    wanted, got = pattern.split("."), subject.split(".")
    return len(wanted) == len(got) and all(w in ("*", g) for w, g in zip(wanted, got, strict=True))
