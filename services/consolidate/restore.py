"""Restore (POST /restore): an archive written back into the graph, exactly.

Two passes over the archive. The first checks it whole before anything is
written: its version, every line's shape, the checksum and counts of its
manifest, whose tenants it holds (a caller restores only its own tenant's
records unless it acts for every tenant, an operator, whose records each go
into the tenant they name) and that no tenant it names already holds
memories (unless merge). An archive is untrusted input: the labels, edge
types and tenants only a forgery holds refuse it whole (archive.py); a
record that is wrong on its own is left out and counted, and so is a
tenant's audit log that does not verify as a chain (archive_checks.py). Its
signature says whether this deployment wrote it: an unsigned or
foreign-signed archive is restored only when the caller allows it (an
operator's allow_unsigned). The second writes the nodes a page at a time with
their properties as archived (ids, validity windows, supersession times,
versions, embeddings: nothing is recomputed, so a superseded or expired
memory stays so), then the edges between them.

A node already stored under the same identity (archive_restore.identity: its id,
key or tag within its tenant) is matched, not duplicated: the archive's
version replaces it only when newer (archive_restore.is_newer), so a merge never
overwrites a newer record. Edges between two matched nodes are merged
(never doubled); the others are created. A tenant that keeps an audit log
already keeps its own: the archive's entries are not written beside it.

Nothing is published: the vector index is rebuilt from the graph afterwards
(the gateway calls recall's RebuildIndex per tenant), and the memories the
archive holds without a vector are listed for enrich to embed.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, BinaryIO

import structlog

from services.core.domain import archive, archive_checks, archive_restore
from services.core.domain.archive import ArchiveEdge, ArchiveNode, Header, Manifest
from services.core.domain.archive_decoder import ArchiveDecoder
from services.core.domain.errors import InvalidArgument
from services.core.ports.archive import GraphRestore

log = structlog.get_logger()

#: (path, decoder, bounds as keywords) -> the archive's records, a batch at a time (backup.read_archive).
ArchiveSource = Callable[..., AsyncIterator[list[Any]]]
#: Problems the answer spells out (the rest are counted).
PROBLEMS_SHOWN = 20


@dataclass(slots=True)
class TenantRestore:
    tenant: str
    memories: int = 0
    unembedded_ids: list[str] = field(default_factory=list)


@dataclass(slots=True)
class RestoreProgress:
    phase: str
    nodes_total: int = 0
    edges_total: int = 0
    nodes_done: int = 0
    edges_done: int = 0
    created: int = 0
    updated: int = 0
    kept: int = 0
    done: bool = False
    tenants: list[TenantRestore] = field(default_factory=list)
    header: Header | None = None
    manifest: Manifest | None = None
    elapsed_seconds: float = 0.0
    #: Records left out on their own (and the edges touching them), audit log nodes left out.
    skipped: int = 0
    audit_left_out: int = 0
    problems: list[str] = field(default_factory=list)
    #: "signed", "unsigned" or "foreign" (archive.signature_state).
    signature: str = ""


@dataclass(slots=True)
class _Plan:
    """What the verify pass learnt: the header, the manifest, key-less nodes per (label, tenant)."""

    header: Header
    manifest: Manifest
    tenants: set[str]
    keyless: Counter
    signature: str = ""
    #: Archive node numbers left out (a bad record, or an audit log that did not verify).
    skipped: set[int] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)
    #: Tenant -> why its audit log is left out.
    audit_refused: dict[str, str] = field(default_factory=dict)
    #: Archive node numbers of the audit logs left out.
    audit_left: set[int] = field(default_factory=set)


class Restorer:
    """Verifies an archive, then writes it into the graph."""

    def __init__(
        self,
        *,
        graph: GraphRestore,
        read: ArchiveSource,
        page_size: int,
        keys: tuple[bytes, ...] = (),
        max_line_bytes: int | None = None,
        max_unpacked_bytes: int | None = None,
    ):
        self._graph = graph
        self._read = read
        self._page = page_size
        #: The backup key and the previous ones: an archive signed by one of them is this deployment's.
        self._keys = keys
        self._bounds = {
            name: value
            for name, value in (("max_line_bytes", max_line_bytes), ("max_unpacked_bytes", max_unpacked_bytes))
            if value is not None
        }

    def _records(self, source: BinaryIO, decoder: ArchiveDecoder, declared_bytes: int) -> AsyncIterator[list[Any]]:
        source.seek(0)
        return self._read(source, decoder, **self._bounds, declared_bytes=declared_bytes)

    async def _verify(self, source: BinaryIO, declared_bytes: int) -> _Plan:
        decoder = ArchiveDecoder()
        tenants: set[str] = set()
        keyless: Counter = Counter()
        skipped: set[int] = set()
        problems: list[str] = []
        seen = archive_checks.Seen()
        chains = archive_checks.AuditChains()
        audit_refs: dict[str, list[int]] = {}
        line = 0  # the batches hold every line's record, the header's first
        async for batch in self._records(source, decoder, declared_bytes):
            for record in batch:
                line += 1
                if not isinstance(record, ArchiveNode):
                    continue
                tenants.add(record.tenant)  # whose records it holds, a record left out's too
                problem = archive_checks.record_problem(record)
                if problem is None and seen.again(record):
                    problem = ("properties.id", "the same memory again")
                if problem is not None:
                    skipped.add(record.ref)
                    if len(problems) < PROBLEMS_SHOWN:
                        problems.append(archive_checks.problem_text(line, record, *problem))
                    continue
                if archive.AUDIT_LABELS.intersection(record.labels):
                    chains.add(record, line)
                    audit_refs.setdefault(record.tenant, []).append(record.ref)
                if archive_restore.identity(record) is None:
                    keyless[(record.labels, record.tenant)] += 1
        manifest = decoder.finish()
        assert decoder.header is not None  # noqa: S101  narrows the type: finish() raised if there was no header
        signature = archive.signature_state(self._keys, manifest, decoder.signature)
        refused = chains.refused(signed=signature == "signed")
        for tenant, why in sorted(refused.items()):
            if len(problems) < PROBLEMS_SHOWN:
                problems.append(f"tenant {tenant!r}: its audit log is left out: {why}")
        plan = _Plan(decoder.header, manifest, tenants, keyless, signature, skipped, problems, refused)
        plan.audit_left = {ref for tenant in refused for ref in audit_refs[tenant]}
        return plan

    async def restore(
        self,
        path: Path,
        *,
        caller: str,
        every_tenant: bool,
        merge: bool,
        allow_unsigned: bool = False,
        declared_bytes: int = 0,
    ) -> AsyncIterator[RestoreProgress]:
        """Restore the archive at `path`; progress after the check and after each page, the last one `done`.

        `declared_bytes`: the unpacked size the manifest file beside the archive declares (0: none),
        read no further. `allow_unsigned`: restore an archive this deployment did not sign (the
        caller checked that only an operator asks).

        The file is opened once and both passes read that one open file: a file put in its place
        (an upload sent again under its handle) between the check and the write is never read."""
        source = await asyncio.to_thread(path.open, "rb")
        try:
            async for progress in self._restore(
                source, path, caller=caller, every_tenant=every_tenant, merge=merge,
                allow_unsigned=allow_unsigned, declared_bytes=declared_bytes,
            ):  # fmt: skip
                yield progress
        finally:
            await asyncio.to_thread(source.close)

    async def _restore(
        self,
        source: BinaryIO,
        path: Path,
        *,
        caller: str,
        every_tenant: bool,
        merge: bool,
        allow_unsigned: bool,
        declared_bytes: int,
    ) -> AsyncIterator[RestoreProgress]:
        began = time.perf_counter()
        plan = await self._verify(source, declared_bytes)
        archive_restore.check_tenants(plan.tenants, caller, every_tenant)
        if plan.signature != "signed" and not allow_unsigned:
            raise unsigned(plan.signature)
        if not merge:
            for tenant in sorted(plan.tenants):
                held = await self._graph.count_memories(tenant)
                if held:
                    raise archive_restore.tenant_not_empty(tenant, held)
        progress = RestoreProgress(
            "verify",
            nodes_total=plan.manifest.node_count,
            edges_total=plan.manifest.edge_count,
            header=plan.header,
            manifest=plan.manifest,
            skipped=len(plan.skipped),
            audit_left_out=len(plan.audit_left),
            problems=list(plan.problems),
            signature=plan.signature,
        )
        log.info(
            "restore verified",
            path=str(path),
            nodes=progress.nodes_total,
            edges=progress.edges_total,
            merge=merge,
            signature=plan.signature,
            skipped=progress.skipped,
            audit_left_out=progress.audit_left_out,
            problems=plan.problems[:5],
        )
        yield replace(progress)
        writer = _PageWriter(self._graph, plan)
        nodes: list[ArchiveNode] = []
        edges: list[ArchiveEdge] = []
        async for batch in self._records(source, ArchiveDecoder(), declared_bytes):
            for record in batch:
                if isinstance(record, ArchiveNode):
                    nodes.append(record)
                elif isinstance(record, ArchiveEdge):
                    edges.append(record)
            while len(nodes) >= self._page or (nodes and edges):
                page, nodes = nodes[: self._page], nodes[self._page :]
                await writer.nodes(page, progress)
                log.info("restore progress", phase="nodes", done=progress.nodes_done, of=progress.nodes_total)
                progress.phase = "nodes"
                yield replace(progress)
            while len(edges) >= self._page:
                edge_page, edges = edges[: self._page], edges[self._page :]
                await writer.edges(edge_page, progress)
                log.info("restore progress", phase="edges", done=progress.edges_done, of=progress.edges_total)
                progress.phase = "edges"
                yield replace(progress)
        if nodes:
            await writer.nodes(nodes, progress)
        if edges:
            await writer.edges(edges, progress)
        progress.phase = "done"
        progress.done = True
        progress.tenants = [writer.tenants[t] for t in sorted(writer.tenants)]
        progress.elapsed_seconds = time.perf_counter() - began
        log.info(
            "restore done",
            path=str(path),
            nodes=progress.nodes_done,
            edges=progress.edges_done,
            created=progress.created,
            updated=progress.updated,
            kept=progress.kept,
            skipped=progress.skipped,
            audit_left_out=progress.audit_left_out,
            seconds=round(progress.elapsed_seconds, 3),
        )
        yield replace(progress)


def unsigned(signature: str) -> InvalidArgument:
    """An archive this deployment did not sign, restored without allow_unsigned."""
    whose = "carries no signature" if signature == "unsigned" else "is signed with a key this deployment does not hold"
    return InvalidArgument(
        "ARCHIVE_UNSIGNED" if signature == "unsigned" else "ARCHIVE_SIGNATURE_UNKNOWN",
        f"the archive {whose} (BACKUP_SIGNING_KEY and BACKUP_SIGNING_PREVIOUS_KEYS): only an operator restores it,"
        " asking allow_unsigned: true",
        field="allow_unsigned",
        signature=signature,
    )


class _PageWriter:
    """Writes pages of nodes and edges, remembering where each archived node went."""

    def __init__(self, graph: GraphRestore, plan: _Plan):
        self._graph = graph
        self._plan = plan
        #: archive node number -> stored node id
        self._ids: dict[int, int] = {}
        #: archive node numbers matched to a node stored before the restore
        self._matched: set[int] = set()
        #: (label, tenant) -> whether the graph held such nodes before (else no lookups are needed)
        self._held: dict[tuple[str, str], bool] = {}
        #: archive node numbers not written (audit entries of a tenant that keeps its own log)
        self._skipped: set[int] = set()
        self.tenants: dict[str, TenantRestore] = {}

    async def _holds(self, label: str, tenant: str) -> bool:
        key = (label, tenant)
        if key not in self._held:
            self._held[key] = await self._graph.count_label(label, tenant) > 0
        return self._held[key]

    async def _keeps_own_log(self, node: ArchiveNode) -> bool:
        """Whether `node` is an audit log node of a tenant that keeps a log of its own already."""
        return bool(archive.AUDIT_LABELS.intersection(node.labels)) and await self._holds("AuditCounter", node.tenant)

    async def nodes(self, page: list[ArchiveNode], progress: RestoreProgress) -> None:
        groups: dict[tuple[str, ...], list[ArchiveNode]] = defaultdict(list)
        for node in page:
            if node.ref in self._plan.skipped or node.ref in self._plan.audit_left:
                self._skipped.add(node.ref)  # counted by the verify pass
                continue
            if await self._keeps_own_log(node):
                # The tenant's chain stays whole: the archive's entries stay in the archive. (Entries the
                # two logs share, an archive of this very tenant, would have been kept as they are anyway.)
                self._skipped.add(node.ref)
                progress.kept += 1
                continue
            groups[node.labels].append(node)
            if "Memory" in node.labels:
                entry = self.tenants.setdefault(node.tenant, TenantRestore(node.tenant))
                entry.memories += 1
                if not node.properties.get("embedding"):
                    entry.unembedded_ids.append(str(node.properties.get("id")))
        for labels, members in groups.items():
            found = await self._lookup(labels, members)
            fresh = [n for n, stored in zip(members, found, strict=True) if stored is None]
            replace = []
            for node, stored in zip(members, found, strict=True):
                if stored is None:
                    continue
                ref, properties = stored
                self._ids[node.ref] = ref
                self._matched.add(node.ref)
                if archive_restore.is_newer(node.properties, properties):
                    replace.append((ref, node.properties))
                    progress.updated += 1
                else:
                    progress.kept += 1
            if replace:
                await self._graph.replace_nodes(replace)
            if fresh:
                made = await self._graph.create_nodes(labels, [n.properties for n in fresh])
                self._ids.update((n.ref, ref) for n, ref in zip(fresh, made, strict=True))
                progress.created += len(fresh)
        progress.nodes_done += len(page)

    async def _lookup(self, labels: tuple[str, ...], members: list[ArchiveNode]) -> list[tuple[int, dict] | None]:
        """The stored node each archived one matches, or None (a new one)."""
        found: list[tuple[int, dict] | None] = [None] * len(members)
        label = labels[0]
        asks: dict[str | None, list[int]] = defaultdict(list)
        for i, node in enumerate(members):
            if not await self._holds(label, node.tenant):
                continue  # the graph held no such node of the tenant: nothing to match
            key = archive_restore.identity(node)
            if key is not None:
                asks[key[0]].append(i)
            elif self._plan.keyless[(node.labels, node.tenant)] == 1:
                asks[None].append(i)  # the tenant's one node of the label (a counter, say)
        for prop, indexes in asks.items():
            keys = [(members[i].tenant, None if prop is None else members[i].properties[prop]) for i in indexes]
            for i, stored in zip(indexes, await self._graph.find(label, prop, keys), strict=True):
                found[i] = stored
        return found

    async def edges(self, page: list[ArchiveEdge], progress: RestoreProgress) -> None:
        groups: dict[tuple[str, bool], list[tuple[int, int, dict]]] = defaultdict(list)
        for edge in page:
            if edge.source in self._skipped or edge.target in self._skipped:
                if edge.source in self._plan.skipped or edge.target in self._plan.skipped:
                    progress.skipped += 1  # an edge of a record left out
                continue
            both_stored = edge.source in self._matched and edge.target in self._matched
            groups[(edge.type, both_stored)].append((self._ids[edge.source], self._ids[edge.target], edge.properties))
        for (kind, both_stored), rows in groups.items():
            await self._graph.create_edges(kind, rows, merge=both_stored)
        progress.edges_done += len(page)
