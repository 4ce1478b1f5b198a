"""The typed place where configuration is read: one settings group per concern.

Every limit, weight, name and address lives in a group (a module here); a
process loads the groups it uses, once, at start-up (never at import time).
Environment variable names are the field names in upper case.
"""

from services.core.settings.backup import BackupSettings
from services.core.settings.composed import GROUPS, OWNER, Settings, all_fields
from services.core.settings.consolidation import ConsolidationSettings
from services.core.settings.consumers import ConsumerSettings
from services.core.settings.enrichment import EnrichmentSettings
from services.core.settings.gateway import GatewaySettings
from services.core.settings.memory import MemorySettings
from services.core.settings.models import ModelSettings
from services.core.settings.plane import DEFAULT_GRPC_PORTS, DEFAULT_METRICS_PORTS, SERVICE_NAMES, PlaneSettings
from services.core.settings.process import ProcessSettings
from services.core.settings.recall import RecallSettings
from services.core.settings.stores import BusSettings, GraphSettings, VectorSettings

__all__ = [
    "DEFAULT_GRPC_PORTS",
    "DEFAULT_METRICS_PORTS",
    "GROUPS",
    "OWNER",
    "SERVICE_NAMES",
    "BackupSettings",
    "BusSettings",
    "ConsolidationSettings",
    "ConsumerSettings",
    "EnrichmentSettings",
    "GatewaySettings",
    "GraphSettings",
    "MemorySettings",
    "ModelSettings",
    "PlaneSettings",
    "ProcessSettings",
    "RecallSettings",
    "Settings",
    "VectorSettings",
    "all_fields",
]
