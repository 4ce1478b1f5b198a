"""Which durable feeds a recall replica's index: its own with the embedded
index (named for the replica), the shared one with a Qdrant server."""

from __future__ import annotations

import socket

from services.core.replica import projector_durable, projector_inactive_seconds, replica_id
from services.core.settings import Settings


def settings(**values) -> Settings:
    return Settings(_env_file=None, **values)


def test_two_replicas_on_one_host_each_with_its_data_dir_get_a_durable_each(tmp_path):
    one, two = settings(memgrid_data_dir=tmp_path / "a"), settings(memgrid_data_dir=tmp_path / "b")
    assert projector_durable(one) != projector_durable(two)
    assert projector_durable(one).startswith("recall-projector-")
    # The same host and disk after a restart: the same durable, so the index resumes where it stood.
    assert projector_durable(one) == projector_durable(settings(memgrid_data_dir=tmp_path / "a"))


def test_the_default_replica_id_is_the_host_name_as_a_durable_may_spell_it(tmp_path, monkeypatch):
    monkeypatch.setattr(socket, "gethostname", lambda: "recall-7.pods.local")
    assert replica_id(settings(memgrid_data_dir=tmp_path)).startswith("recall-7-pods-local-")


def test_a_replica_id_set_names_the_durable_without_what_jetstream_refuses():
    assert projector_durable(settings(recall_replica_id="recall-1")) == "recall-projector-recall-1"
    assert projector_durable(settings(recall_replica_id="zone a.recall>1")) == "recall-projector-zone-a-recall-1"


def test_replicas_of_a_qdrant_server_share_the_one_durable_which_never_lapses():
    shared = settings(qdrant_url="http://qdrant:6333", recall_replica_id="recall-1", projector_durable="proj")
    assert projector_durable(shared) == "proj"
    assert projector_inactive_seconds(shared) is None


def test_a_replicas_own_durable_lapses_after_the_inactive_threshold():
    assert projector_inactive_seconds(settings()) == 7 * 86400.0
    assert projector_inactive_seconds(settings(recall_projector_inactive_seconds=600)) == 600
    assert projector_inactive_seconds(settings(recall_projector_inactive_seconds=0)) is None
