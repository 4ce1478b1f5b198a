"""docs/configuration.md is generated from Settings: it must list what the code reads."""

from __future__ import annotations

from services.core import settings_doc
from services.core.settings import all_fields


def test_the_configuration_reference_is_up_to_date():
    written = settings_doc.TARGET.read_text() if settings_doc.TARGET.exists() else ""
    assert written == settings_doc.render(), (
        "docs/configuration.md is stale: regenerate it with `make docs` (python -m services.core.settings_doc)"
    )


def test_every_setting_is_listed_once_with_its_default():
    rows = [row for section in settings_doc.sections() for row in section.rows]
    assert sorted(env for env, *_ in rows) == sorted(name.upper() for name in all_fields())
    types = {env: kind for env, kind, _, _ in rows}
    defaults = {env: default for env, _, default, _ in rows}
    assert defaults["PORT"] == "`8001`" and defaults["QDRANT_URL"] == "unset"
    assert types["ENRICHMENT_ENTITY_NICE"] == "int, ≥ 0, ≤ 19"


SAMPLE = """
class Settings:
    model_config = {}

    # Storage: where data lives.
    memgrid_data_dir: Path = Path("data")
    # The graph's port.
    falkordb_port: int = 6379  # FalkorDB
    nats_url: str = "x"

    port: int = 8001
"""


def test_comments_become_sections_and_descriptions():
    sections = settings_doc.sections(SAMPLE)
    assert [(s.title, s.intro) for s in sections] == [("Storage", "Storage: where data lives."), ("Other", "")]
    described = {env: description for env, _, _, description in sections[0].rows}
    assert described == {"MEMGRID_DATA_DIR": "", "FALKORDB_PORT": "The graph's port. FalkorDB", "NATS_URL": ""}
