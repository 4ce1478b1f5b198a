"""The consolidate service's composition root: settings -> adapters -> servicer."""

from __future__ import annotations

from memgrid.v1 import consolidate_service_pb2, consolidate_service_pb2_grpc
from services.consolidate.backup import BackupWriter
from services.consolidate.servicer import ConsolidateServicer
from services.core.adapters.falkor import FalkorGraph
from services.core.adapters.nats_bus import NatsEventBus
from services.core.grpc.app import ServiceApp, full_service_name
from services.core.settings import Settings
from services.core.wiring import event_bus, graph_store


def build_app(
    settings: Settings, *, graph: FalkorGraph | None = None, events: NatsEventBus | None = None
) -> ServiceApp:
    """The service from settings; tests may pass either adapter instead (None: built from settings)."""
    graph = graph or graph_store(settings)
    events = events or event_bus(settings)
    return ServiceApp(
        service_name=full_service_name(consolidate_service_pb2, "ConsolidateService"),
        add_servicer=consolidate_service_pb2_grpc.add_ConsolidateServiceServicer_to_server,
        servicer=ConsolidateServicer(
            BackupWriter(
                export=graph.export,
                directory=settings.memgrid_data_dir / "backups",
                page_size=settings.backup_page_size,
            )
        ),
        startups=[graph.lifecycle.ensure_schema, events.connect],
        shutdowns=[events.close, graph.lifecycle.close],
    )
