"""The ingest service's composition root: settings -> adapters -> servicer."""

from __future__ import annotations

from memgrid.v1 import ingest_service_pb2, ingest_service_pb2_grpc
from services.core.grpc.app import ServiceApp, full_service_name
from services.core.settings import Settings
from services.core.wiring import event_bus, graph_store
from services.ingest.handlers import IngestHandlers
from services.ingest.servicer import IngestServicer


def build_app(settings: Settings, **overrides) -> ServiceApp:
    """Adapters from settings; tests may pass `graph=` or `events=` instead."""
    graph = overrides.get("graph") or graph_store(settings)
    events = overrides.get("events") or event_bus(settings)
    handlers = IngestHandlers(graph=graph, events=events, limits=settings.limits)
    return ServiceApp(
        service_name=full_service_name(ingest_service_pb2, "IngestService"),
        add_servicer=ingest_service_pb2_grpc.add_IngestServiceServicer_to_server,
        servicer=IngestServicer(handlers),
        startups=[graph.ensure_schema, events.connect],
        shutdowns=[events.close, graph.close],
    )
