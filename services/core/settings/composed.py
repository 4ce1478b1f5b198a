"""A process's settings: the groups it uses, each read once from the environment at start-up."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic.fields import FieldInfo

from services.core.domain.limits import Limits
from services.core.settings.backup import BackupSettings
from services.core.settings.base import Group
from services.core.settings.consolidation import ConsolidationSettings
from services.core.settings.consumers import ConsumerSettings
from services.core.settings.enrichment import EnrichmentSettings
from services.core.settings.gateway import GatewaySettings
from services.core.settings.memory import MemorySettings
from services.core.settings.models import ModelSettings
from services.core.settings.plane import PlaneSettings
from services.core.settings.process import ProcessSettings
from services.core.settings.recall import RecallSettings
from services.core.settings.stores import BusSettings, GraphSettings, VectorSettings

#: Every group by the attribute it has on Settings, in the order docs/configuration.md lists them.
GROUPS: dict[str, type[Group]] = {
    "process": ProcessSettings,
    "plane": PlaneSettings,
    "graph": GraphSettings,
    "bus": BusSettings,
    "vectors": VectorSettings,
    "consumers": ConsumerSettings,
    "memory": MemorySettings,
    "models": ModelSettings,
    "recall": RecallSettings,
    "enrichment": EnrichmentSettings,
    "consolidation": ConsolidationSettings,
    "backup": BackupSettings,
    "gateway": GatewaySettings,
}

#: The group owning each setting (a setting's name is its environment variable in lower case).
OWNER: dict[str, str] = {name: group for group, model in GROUPS.items() for name in model.model_fields}


def all_fields() -> dict[str, FieldInfo]:
    """Every setting of every group, by name."""
    return {name: model.model_fields[name] for model in GROUPS.values() for name in model.model_fields}


class Settings:
    """The groups one process uses, each a typed model read from the environment (and `.env`).

    `Settings()` loads every group (the devstack, the tests, the tools); `Settings.load("plane", ...)`
    only those named (a service's main). `values` override settings by name, each going to the group
    that owns it. A group the process did not load is an AttributeError naming it.
    """

    process: ProcessSettings
    plane: PlaneSettings
    graph: GraphSettings
    bus: BusSettings
    vectors: VectorSettings
    consumers: ConsumerSettings
    memory: MemorySettings
    models: ModelSettings
    recall: RecallSettings
    enrichment: EnrichmentSettings
    consolidation: ConsolidationSettings
    backup: BackupSettings
    gateway: GatewaySettings

    def __init__(self, *, groups: Iterable[str] | None = None, _env_file: str | None = ".env", **values: Any):
        names = tuple(GROUPS) if groups is None else tuple(groups)
        unknown = sorted(set(names) - set(GROUPS))
        if unknown:
            raise TypeError(f"no such settings group: {', '.join(unknown)}")
        _check_names(values, names)
        self._groups = names
        for name in names:
            own = {key: value for key, value in values.items() if OWNER[key] == name}
            # pydantic-settings' __init__ takes _env_file; the signature mypy synthesizes from the fields does not.
            setattr(self, name, GROUPS[name](_env_file=_env_file, **own))  # type: ignore[call-arg]

    @classmethod
    def load(cls, *groups: str, _env_file: str | None = ".env", **values: Any) -> Settings:
        """Only the named groups, read from the environment."""
        return cls(groups=groups, _env_file=_env_file, **values)

    @property
    def groups(self) -> tuple[str, ...]:
        """The names of the groups loaded."""
        return self._groups

    def override(self, values: dict[str, Any]) -> Settings:
        """A copy with the named settings changed (not validated again, as pydantic's model_copy)."""
        _check_names(values, self._groups)
        copy = object.__new__(Settings)
        copy._groups = self._groups
        for name in self._groups:
            own = {key: value for key, value in values.items() if OWNER[key] == name}
            group = getattr(self, name)
            setattr(copy, name, group.model_copy(update=own) if own else group)
        return copy

    def __getattr__(self, name: str) -> Any:
        # Only reached for what __init__ did not set: a group this process did not load.
        if name in GROUPS:
            raise AttributeError(f"the {name} settings are not loaded in this process (Settings.load)")
        raise AttributeError(name)

    @property
    def limits(self) -> Limits:
        """The memory model's validation limits, which take the vector size from the vector index's group
        (needs the memory and vectors groups)."""
        return self.memory.limits(self.vectors.vector_size)

    def __repr__(self) -> str:
        return f"Settings({', '.join(self._groups)})"


def _check_names(values: dict[str, Any], groups: tuple[str, ...]) -> None:
    unknown = sorted(key for key in values if key not in OWNER)
    if unknown:
        raise TypeError(f"no such setting: {', '.join(unknown)}")
    unloaded = sorted(key for key in values if OWNER[key] not in groups)
    if unloaded:
        raise TypeError(f"settings of groups not loaded: {', '.join(unloaded)}")
