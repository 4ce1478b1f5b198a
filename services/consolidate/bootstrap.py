"""The consolidate service's composition root: settings -> adapters -> servicer."""

from __future__ import annotations

from memgrid.v1 import consolidate_service_pb2, consolidate_service_pb2_grpc
from services.consolidate.archive_reader import read_archive
from services.consolidate.audit_sealer import AuditSealer
from services.consolidate.backup import BackupScheduler, BackupWriter
from services.consolidate.backup_files import BackupFiles, UploadSweeper
from services.consolidate.backup_key import backup_keys
from services.consolidate.restore import Restorer
from services.consolidate.scheduler import ConsolidationRunner, ConsolidationScheduler
from services.consolidate.servicer import ConsolidateServicer
from services.consolidate.tasks import ConsolidationTasks, TaskPolicies
from services.core.adapters.falkor import FalkorGraph
from services.core.adapters.nats_bus import NatsEventBus
from services.core.disputes import Disputes
from services.core.grpc.app import ServiceApp, full_service_name
from services.core.ports.models import LanguageModel
from services.core.settings import Settings
from services.core.wiring import event_bus, graph_store, language_model, outbox_relay

#: The settings groups this service reads (its main loads only these, with process and plane).
GROUPS = ("process", "plane", "graph", "bus", "memory", "models", "consolidation", "backup")


def build_app(
    settings: Settings,
    *,
    graph: FalkorGraph | None = None,
    events: NatsEventBus | None = None,
    llm: LanguageModel | None = None,
) -> ServiceApp:
    """The service from settings; tests may pass any adapter instead (None:
    built from settings, the LLM, creative association's judge, only when
    OPENAI_API_KEY is set)."""
    graph = graph or graph_store(settings.graph, settings.process, backup=settings.backup)
    events = events or event_bus(settings.bus, settings.process)
    llm = llm or language_model(settings.models)
    # Publishes what the passes record in the outbox; ingest's relay sweeps leftovers.
    relay = outbox_relay(settings.bus, graph.outbox, events, sweeps=False)
    tasks = ConsolidationTasks(
        disputes=Disputes(graph.trust, relay.submit, settings.memory.review_policy),
        store=graph.consolidation,
        writer=graph.writer,
        submit=relay.submit,
        policies=TaskPolicies(
            decay=settings.consolidation.decay_policy,
            forget=settings.consolidation.forget_policy,
            creative=settings.consolidation.association_policy,
            cluster=settings.consolidation.cluster_policy,
            cluster_max_memories=settings.consolidation.consolidation_cluster_max_memories,
        ),
        page_size=settings.consolidation.consolidation_page_size,
        sample_size=settings.consolidation.consolidation_report_sample,
        page_pause_seconds=settings.consolidation.consolidation_page_pause_seconds,
        page_pause_ratio=settings.consolidation.consolidation_page_pause_ratio,
        write_epsilon=settings.consolidation.consolidation_decay_write_epsilon,
        llm=llm,
    )
    runner = ConsolidationRunner(
        store=graph.consolidation,
        tasks=tasks,
        schedule=settings.consolidation.schedule,
        lease_seconds=settings.consolidation.consolidation_lease_seconds,
        history_keep=settings.consolidation.consolidation_history_keep,
    )
    scheduler = ConsolidationScheduler(
        runner, graph.consolidation, tick_seconds=settings.consolidation.consolidation_tick_seconds
    )
    keys = backup_keys(settings.backup, settings.process.memgrid_data_dir)
    files = BackupFiles(
        settings.backup.backups_dir(settings.process.memgrid_data_dir),
        max_upload_bytes=settings.backup.restore_max_upload_bytes,
    )
    backups = BackupWriter(
        graph=graph.backups,
        files=files,
        page_size=settings.backup.backup_page_size,
        keep=settings.backup.backup_keep,
        key=keys[0],
    )
    sweeper = UploadSweeper(
        files,
        max_age_seconds=settings.backup.restore_upload_max_age_seconds,
        interval_seconds=settings.backup.restore_upload_sweep_seconds,
    )
    # Hash-chains the audit log's new entries (services/core/domain/audit.py).
    sealer = AuditSealer(
        graph.audit,
        seal_seconds=settings.consolidation.audit_seal_seconds,
        batch=settings.consolidation.audit_seal_batch,
    )
    backup_schedule = BackupScheduler(
        backups, graph.consolidation, interval_seconds=settings.backup.backup_interval_seconds
    )
    return ServiceApp(
        service_name=full_service_name(consolidate_service_pb2, "ConsolidateService"),
        add_servicer=consolidate_service_pb2_grpc.add_ConsolidateServiceServicer_to_server,
        servicer=ConsolidateServicer(
            backups,
            restorer=Restorer(
                graph=graph.restore,
                read=read_archive,
                page_size=settings.backup.restore_page_size,
                keys=keys,
                max_line_bytes=settings.backup.restore_max_line_bytes,
                max_unpacked_bytes=settings.backup.restore_max_unpacked_bytes,
            ),
            chunk_bytes=settings.backup.backup_chunk_bytes,
            runner=runner,
            store=graph.consolidation,
            status_history=settings.consolidation.consolidation_status_history,
        ),
        startups=[
            graph.lifecycle.ensure_schema,
            events.connect,
            relay.start,
            scheduler.start,
            backup_schedule.start,
            sealer.start,
            sweeper.start,
        ],
        shutdowns=[
            sweeper.stop,
            sealer.stop,
            backup_schedule.stop,
            scheduler.stop,
            relay.stop,
            events.close,
            graph.lifecycle.close,
        ],
    )
