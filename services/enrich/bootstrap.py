"""The enrich service's composition root: settings -> adapters -> servicer."""

from __future__ import annotations

from memgrid.v1 import enrich_service_pb2, enrich_service_pb2_grpc
from services.core.grpc.app import ServiceApp, full_service_name
from services.core.settings import Settings
from services.core.wiring import event_bus, graph_store
from services.enrich.servicer import EnrichServicer


def build_app(settings: Settings, **overrides) -> ServiceApp:
    """Adapters from settings; tests may pass `graph=` or `events=` instead."""
    graph = overrides.get("graph") or graph_store(settings)
    events = overrides.get("events") or event_bus(settings)
    return ServiceApp(
        service_name=full_service_name(enrich_service_pb2, "EnrichService"),
        add_servicer=enrich_service_pb2_grpc.add_EnrichServiceServicer_to_server,
        servicer=EnrichServicer(),
        startups=[graph.ensure_schema, events.connect],
        shutdowns=[events.close, graph.close],
    )
