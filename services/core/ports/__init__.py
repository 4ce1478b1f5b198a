"""Ports: what the use cases need from the outside world, as Protocols, one
module per store and each Protocol as wide as its caller.

Adapters in services.core.adapters implement them, one per technology; tests
inject the same adapters against real servers, or fakes proved equal to them.
Import a port from its module; the names below are the ones services/ingest
imports from the package.
"""

from services.core.domain.idempotency import IdempotencyClaim
from services.core.ports.graph import MemoryLookup
from services.core.ports.models import LanguageModel
from services.core.ports.trust import TrustWriter
from services.core.ports.writes import MemoryWriter

#: Ingest's name for its trust port (services/ingest imports it so).
TrustStore = TrustWriter

__all__ = ["IdempotencyClaim", "LanguageModel", "MemoryLookup", "MemoryWriter", "TrustStore", "TrustWriter"]
