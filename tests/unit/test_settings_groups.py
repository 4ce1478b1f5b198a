"""Settings by concern: each group owns its variables, and a process loads only the groups it declares."""

from __future__ import annotations

import pytest

from gateway import app as gateway_app
from services.consolidate import bootstrap as consolidate
from services.core.settings import GROUPS, OWNER, RecallSettings, Settings
from services.enrich import bootstrap as enrich
from services.ingest import bootstrap as ingest
from services.recall import bootstrap as recall

#: Fast stand-ins, so building a service loads no model (each given only when its group is loaded).
FAST = {
    "embedding_provider": "placeholder",
    "enrichment_spacy_blank": True,
    "enrichment_entity_process": False,
    "service_claim_key": "c" * 32,
    "backup_signing_key": "b" * 32,
}


def loaded(groups, tmp_path) -> Settings:
    """Only `groups` (with process and plane, as every service's main loads them), no .env."""
    names = tuple(dict.fromkeys(("process", "plane", *groups)))
    values = {key: value for key, value in FAST.items() if OWNER[key] in names}
    return Settings.load(*names, _env_file=None, memgrid_data_dir=tmp_path, **values)


@pytest.mark.parametrize("bootstrap", [ingest, recall, enrich, consolidate], ids=lambda b: b.__name__.split(".")[1])
async def test_each_service_builds_from_the_groups_it_declares_alone(bootstrap, tmp_path):
    settings = loaded(bootstrap.GROUPS, tmp_path)
    assert set(settings.groups) < set(GROUPS)  # not every group: the process loads what it declares
    app = bootstrap.build_app(settings)  # builds every adapter (nothing connects before start)
    assert app.service_names


def test_the_gateway_builds_from_the_groups_it_declares_alone(tmp_path):
    app = gateway_app.create_app(loaded(gateway_app.GROUPS, tmp_path), "t" * 32)
    assert app.state.settings.groups == gateway_app.GROUPS


def test_a_group_the_process_did_not_load_is_refused_by_name():
    settings = Settings.load("process", "plane", _env_file=None)
    with pytest.raises(AttributeError, match="the recall settings are not loaded"):
        _ = settings.recall
    with pytest.raises(TypeError, match="RECALL_MAX_LIMIT|recall_max_limit"):
        Settings.load("process", _env_file=None, recall_max_limit=7)


def test_a_value_goes_to_the_group_owning_it_and_an_unknown_name_is_refused():
    settings = Settings(_env_file=None, falkordb_port=7000, recall_max_limit=7)
    assert settings.graph.falkordb_port == 7000 and settings.recall.recall_max_limit == 7
    assert settings.override({"falkordb_port": 7001}).graph.falkordb_port == 7001
    assert settings.graph.falkordb_port == 7000  # a copy
    with pytest.raises(TypeError, match="no such setting: not_a_setting"):
        Settings(_env_file=None, not_a_setting=1)


def test_every_setting_belongs_to_exactly_one_group():
    names = [name for model in GROUPS.values() for name in model.model_fields]
    assert len(names) == len(set(names)) == len(OWNER)


def test_a_group_reads_its_own_variables_from_the_environment(monkeypatch):
    monkeypatch.setenv("RECALL_MAX_LIMIT", "42")
    monkeypatch.setenv("FALKORDB_PORT", "7001")
    assert RecallSettings(_env_file=None).recall_max_limit == 42
    assert Settings.load("graph", _env_file=None).graph.falkordb_port == 7001


def test_the_recall_policy_takes_its_trust_weights_from_the_settings():
    settings = Settings(_env_file=None, recall_fiction_weight=0.3, recall_disputed_weight=0.2)
    policy = settings.recall.policy(settings.limits)
    assert (policy.fiction_weight, policy.disputed_weight) == (0.3, 0.2)
    default = Settings(_env_file=None)
    fiction = RecallSettings.model_fields["recall_fiction_weight"].default
    assert default.recall.policy(default.limits).fiction_weight == fiction == 0.7
