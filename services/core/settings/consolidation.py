"""Consolidate's settings: its runs, and the rules of decay, association, clustering and forgetting."""

from __future__ import annotations

from pydantic import Field, model_validator

from services.core.domain.association import AssociationPolicy
from services.core.domain.clustering import ClusterPolicy
from services.core.domain.consolidation import Schedule, Task
from services.core.domain.decay import DecayPolicy
from services.core.domain.forgetting import ForgetPolicy
from services.core.settings.base import Group


class ConsolidationSettings(Group):
    """Consolidation: its runs, the audit sealer, and the rules of its four passes."""

    # The consolidation service's runs (the tasks' own rules are the
    # CONSOLIDATION_* settings of decay, association, clustering, forgetting).
    # How often the scheduler looks for due tasks; 0: no scheduler (on demand only).
    consolidation_tick_seconds: float = Field(default=60.0, ge=0)
    consolidation_page_size: int = Field(default=250, ge=1)  # memories per graph read and batched write of a pass
    consolidation_report_sample: int = Field(default=20, ge=0)  # changes a report lists (before/after), per task
    # The pause after each page of a pass is this ratio times the page's own time (its read, decisions and
    # write), at least CONSOLIDATION_PAGE_PAUSE_SECONDS: a duty cycle, the pass holds at most 1 / (1 + ratio)
    # of the store's time, so a page slowed by a loaded store waits longer and recall's queries get in
    # between. At 2.0 a first pass over 100k took 41 s with recall's p95 1.35x its figure at rest; at 0.5,
    # 33 s and 1.74x (docs/performance.md).
    consolidation_page_pause_ratio: float = Field(default=2.0, ge=0)
    # The least pause between a pass's pages (0: only the ratio's).
    consolidation_page_pause_seconds: float = Field(default=0.05, ge=0)
    # The consolidate process's nice value: its passes yield the CPU to recall and ingest (0: as every process).
    consolidation_nice: int = Field(default=10, ge=0, le=19)
    # Decay rewrites a stored score only when it moved by more than this (a pass
    # a day later moves most scores by a hair: not worth a write).
    consolidation_decay_write_epsilon: float = Field(default=0.0001, ge=0)
    # A (task, tenant) lease's life, renewed every page: a dead replica's lapses after this.
    consolidation_lease_seconds: float = Field(default=300.0, gt=0)
    consolidation_history_keep: int = Field(default=200, ge=1)  # run records kept per tenant (the oldest go)
    consolidation_status_history: int = Field(default=20, ge=0)  # runs GET /consolidate/status lists, newest first
    # The sealer (consolidate) hash-chains new entries this often, in seconds (0: never; verify then sees them
    # unsealed): an entry edited before it is sealed goes unnoticed, so this is the window to keep short.
    audit_seal_seconds: float = Field(default=2.0, ge=0)
    audit_seal_batch: int = Field(default=500, ge=1)  # entries sealed per tenant and query
    # How often the scheduler runs each task per tenant, in seconds (0: only on demand).
    consolidation_decay_interval_seconds: int = Field(default=86_400, ge=0)  # daily
    consolidation_creative_interval_seconds: int = Field(default=604_800, ge=0)  # weekly
    consolidation_cluster_interval_seconds: int = Field(default=2_592_000, ge=0)  # monthly (30 days)
    consolidation_forget_interval_seconds: int = Field(default=0, ge=0)  # off: forgetting is opt-in
    # Decay (services/core/domain/decay.py): relevance = exp(-base_rate x age_days) x (0.3 + 0.3 x access)
    # x relationship x (0.5 + importance) x (0.7 + 0.3 x confidence), clamped to [importance x floor_ratio, 1].
    consolidation_decay_base_rate: float = Field(default=0.01, ge=0)  # per day of age
    consolidation_decay_access_fresh_days: float = Field(default=1.0, ge=0)  # an access this recent counts in full
    consolidation_decay_access_rate: float = Field(default=0.05, ge=0)  # older: access = exp(-rate x days since)
    consolidation_decay_relationship_weight: float = Field(default=0.3, ge=0)  # relationship = 1 + w x ln(1 + edges)
    consolidation_decay_relationship_cap: float = Field(default=2.0, ge=1)  # ... at most this
    consolidation_decay_floor_ratio: float = Field(default=0.3, ge=0, le=1)  # the floor is importance x this
    # A memory's score that moved by more than this emits a `decayed` event (a stable store stays quiet).
    consolidation_decay_event_epsilon: float = Field(default=0.01, ge=0)
    # Creative association (services/core/domain/association.py): a random sample of a tenant's memories
    # with vectors; pairs at least this similar and not yet connected get a DISCOVERED (or CONTRADICTS) edge.
    consolidation_association_sample_size: int = Field(default=200, ge=2)
    consolidation_association_threshold: float = Field(default=0.8, ge=-1, le=1)  # least cosine of a pair
    consolidation_association_max_links: int = Field(default=50, ge=0)  # edges made per run and tenant
    consolidation_association_max_per_memory: int = Field(default=3, ge=1)  # ... and per memory in one run
    # CONTRADICTS needs this similarity (the same subject) and a negation or opposing preference on one side.
    consolidation_contradiction_threshold: float = Field(default=0.85, ge=-1, le=1)
    consolidation_contradiction_confidence: float = Field(default=0.6, ge=0, le=1)  # a rule-made one's ceiling
    # Clustering (services/core/domain/clustering.py): greedy groups by cosine to a leader, as MetaPatterns.
    consolidation_cluster_threshold: float = Field(default=0.75, ge=-1, le=1)  # least cosine to the group's leader
    consolidation_cluster_min_size: int = Field(default=3, ge=2)  # smaller groups are no pattern
    consolidation_cluster_max_size: int = Field(default=50, ge=2)  # members of one MetaPattern at most
    consolidation_cluster_max_memories: int = Field(default=5000, ge=1)  # memories one run reads (vectors in RAM)
    consolidation_cluster_summary_chars: int = Field(default=240, ge=20)  # a MetaPattern summary's length at most
    # Forgetting (services/core/domain/forgetting.py): off by default (0). Below the archive threshold a
    # memory is archived, below the delete threshold deleted, unless protected (importance, age, type).
    consolidation_forget_archive_threshold: float = Field(default=0.0, ge=0, le=1)
    consolidation_forget_delete_threshold: float = Field(default=0.0, ge=0, le=1)
    consolidation_forget_protect_importance: float = Field(default=0.7, ge=0, le=1)  # at least this: kept
    consolidation_forget_protect_days: int = Field(default=90, ge=0)  # younger than this (by timestamp): kept
    consolidation_forget_protected_types: list[str] = ["Decision", "Insight"]  # these types are always kept

    @model_validator(mode="after")
    def _deletes_below_archives(self) -> ConsolidationSettings:
        archive, delete = self.consolidation_forget_archive_threshold, self.consolidation_forget_delete_threshold
        if archive and delete and delete > archive:
            raise ValueError(
                f"CONSOLIDATION_FORGET_DELETE_THRESHOLD ({delete}) must not be above "
                f"CONSOLIDATION_FORGET_ARCHIVE_THRESHOLD ({archive}): deletion is for what fell below archiving"
            )
        return self

    @property
    def decay_policy(self) -> DecayPolicy:
        """The numbers of consolidation's decay formula."""
        return DecayPolicy(
            base_rate=self.consolidation_decay_base_rate,
            access_fresh_days=self.consolidation_decay_access_fresh_days,
            access_rate=self.consolidation_decay_access_rate,
            relationship_weight=self.consolidation_decay_relationship_weight,
            relationship_cap=self.consolidation_decay_relationship_cap,
            floor_ratio=self.consolidation_decay_floor_ratio,
            event_epsilon=self.consolidation_decay_event_epsilon,
        )

    @property
    def association_policy(self) -> AssociationPolicy:
        """The numbers of consolidation's creative association."""
        return AssociationPolicy(
            sample_size=self.consolidation_association_sample_size,
            min_similarity=self.consolidation_association_threshold,
            max_links=self.consolidation_association_max_links,
            max_per_memory=self.consolidation_association_max_per_memory,
            contradiction_similarity=self.consolidation_contradiction_threshold,
            contradiction_confidence=self.consolidation_contradiction_confidence,
        )

    @property
    def cluster_policy(self) -> ClusterPolicy:
        """The numbers of consolidation's clustering."""
        return ClusterPolicy(
            min_similarity=self.consolidation_cluster_threshold,
            min_size=self.consolidation_cluster_min_size,
            max_size=self.consolidation_cluster_max_size,
            summary_chars=self.consolidation_cluster_summary_chars,
        )

    @property
    def forget_policy(self) -> ForgetPolicy:
        """The rules of consolidation's forgetting (off while both thresholds are 0)."""
        return ForgetPolicy(
            archive_below=self.consolidation_forget_archive_threshold,
            delete_below=self.consolidation_forget_delete_threshold,
            protect_importance=self.consolidation_forget_protect_importance,
            protect_days=self.consolidation_forget_protect_days,
            protected_types=frozenset(self.consolidation_forget_protected_types),
        )

    @property
    def schedule(self) -> Schedule:
        """How often each consolidation task runs on its own."""
        return Schedule(
            intervals={
                Task.DECAY.value: self.consolidation_decay_interval_seconds,
                Task.CREATIVE.value: self.consolidation_creative_interval_seconds,
                Task.CLUSTER.value: self.consolidation_cluster_interval_seconds,
                Task.FORGET.value: self.consolidation_forget_interval_seconds,
            }
        )
