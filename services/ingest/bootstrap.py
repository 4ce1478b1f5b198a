"""The ingest service's composition root: settings -> adapters -> servicer."""

from __future__ import annotations

from memgrid.v1 import ingest_service_pb2, ingest_service_pb2_grpc
from services.core.adapters.falkor import FalkorGraph
from services.core.adapters.nats_bus import NatsEventBus
from services.core.grpc.app import ServiceApp, full_service_name
from services.core.ports import LanguageModel
from services.core.settings import Settings
from services.core.wiring import event_bus, graph_store, language_model, outbox_relay
from services.ingest.servicer import IngestServicer
from services.ingest.use_cases import IngestHandlers, WritePolicy

#: The settings groups this service reads (its main loads only these, with process and plane).
GROUPS = ("process", "plane", "graph", "bus", "vectors", "memory", "models")


def build_app(
    settings: Settings,
    *,
    graph: FalkorGraph | None = None,
    events: NatsEventBus | None = None,
    llm: LanguageModel | None = None,
) -> ServiceApp:
    """The service from settings; tests may pass any adapter instead (None:
    built from settings, the LLM only when OPENAI_API_KEY is set)."""
    graph = graph or graph_store(settings.graph, settings.process)
    events = events or event_bus(settings.bus, settings.process)
    llm = llm or language_model(settings.models)
    relay = outbox_relay(settings.bus, graph.outbox, events)
    policy = WritePolicy(
        auto_summarize=settings.memory.memory_auto_summarize,
        summary_target_length=settings.memory.memory_summary_target_length,
        idempotency_ttl_seconds=settings.memory.idempotency_ttl_seconds,
        delete_page_size=settings.memory.delete_by_tag_page_size,
        conflict_retries=settings.memory.write_conflict_retries,
    )
    handlers = IngestHandlers(
        writer=graph.writer,
        relay=relay,
        limits=settings.limits,
        llm=llm,
        policy=policy,
        trust=graph.trust,
        review=settings.memory.review_policy,
    )
    return ServiceApp(
        service_name=full_service_name(ingest_service_pb2, "IngestService"),
        add_servicer=ingest_service_pb2_grpc.add_IngestServiceServicer_to_server,
        servicer=IngestServicer(handlers),
        startups=[graph.lifecycle.ensure_schema, events.connect, relay.start],
        shutdowns=[relay.stop, events.close, graph.lifecycle.close],
    )
