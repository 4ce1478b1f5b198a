"""The role every RPC of every service needs, in one table, enforced by
ClaimInterceptor (services/core/grpc/plane.py) before a call reaches its
servicer: the services hold the gateway's roles, so a claim with role `read`
cannot delete a memory by calling ingest directly.

A method's rule is the role the call needs, and the request fields that need
more when they are set: `every_tenant` needs an operator, `force` (storing
content a reviewer's rejection tombstoned) the review role, `allow_unsigned`
(restoring an archive this deployment did not sign) an operator. A method missing
from the table is refused, never served unchecked, and
tests/security/test_service_roles.py walks every generated service
descriptor so none is left out.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.core.grpc.claims import ADMIN_ROLE, OPERATOR_ROLE

READ, WRITE, REVIEW, ADMIN, OPERATOR = "read", "write", "review", ADMIN_ROLE, OPERATOR_ROLE


@dataclass(frozen=True, slots=True)
class MethodRule:
    """The role a method needs; `raised_by`: (request field, role) pairs, the
    role a call needs when that field is set; `no_tenant`: the role a claim on
    no tenant's behalf needs (an operator's, but for the system status)."""

    role: str
    raised_by: tuple[tuple[str, str], ...] = ()
    no_tenant: str = OPERATOR


#: Over every tenant: only an operator's claim.
EVERY_TENANT = (("every_tenant", OPERATOR),)
#: Past a reviewer's rejection (a tombstone): the review role.
FORCE = (("force", REVIEW),)
#: An archive this deployment did not sign (docs/backup.md): only an operator's claim, as every_tenant.
UNSIGNED = (("allow_unsigned", OPERATOR),)

_INGEST = "/memgrid.v1.IngestService/"
_RECALL = "/memgrid.v1.RecallService/"
_AUDIT = "/memgrid.v1.AuditService/"
_ENRICH = "/memgrid.v1.EnrichService/"
_CONSOLIDATE = "/memgrid.v1.ConsolidateService/"

#: Full gRPC method name -> what a call to it needs.
METHOD_RULES: dict[str, MethodRule] = {
    # ingest: the write side.
    _INGEST + "CreateMemory": MethodRule(WRITE, FORCE),
    _INGEST + "BatchCreateMemories": MethodRule(WRITE, FORCE),
    _INGEST + "UpdateMemory": MethodRule(WRITE),
    _INGEST + "DeleteMemory": MethodRule(WRITE),
    _INGEST + "DeleteMemoriesByTag": MethodRule(WRITE),
    _INGEST + "CreateAssociation": MethodRule(WRITE),
    _INGEST + "BatchCreateAssociations": MethodRule(WRITE),
    _INGEST + "SupersedeMemory": MethodRule(WRITE, FORCE),
    _INGEST + "ReviewMemory": MethodRule(REVIEW),
    _INGEST + "RemoveTombstone": MethodRule(ADMIN),
    # recall: every read, and the index.
    _RECALL + "GetMemory": MethodRule(READ),
    _RECALL + "SearchMemories": MethodRule(READ),
    _RECALL + "ListMemoriesByTag": MethodRule(READ),
    _RECALL + "ExportMemories": MethodRule(READ),
    _RECALL + "ListRelatedMemories": MethodRule(READ),
    _RECALL + "StartupRecall": MethodRule(READ),
    _RECALL + "AnalyzeMemories": MethodRule(READ),
    _RECALL + "GetGraphSnapshot": MethodRule(READ),
    _RECALL + "ListNeighbors": MethodRule(READ),
    _RECALL + "GetGraphStats": MethodRule(READ),
    _RECALL + "ListMemoryTypes": MethodRule(READ),
    _RECALL + "ListRelationTypes": MethodRule(READ),
    _RECALL + "RebuildIndex": MethodRule(ADMIN, EVERY_TENANT),
    _RECALL + "FindSimilar": MethodRule(READ),  # enrich's neighbour search
    # On no tenant's behalf too: the gateway's own call for an anonymous /health, which it filters. A tenantless
    # read claim it signs for that, captured, is refused by every other method; a tenantless operator claim is not.
    _RECALL + "GetSystemStatus": MethodRule(READ, no_tenant=READ),
    _RECALL + "ListReviewQueue": MethodRule(REVIEW),
    _RECALL + "ListTombstones": MethodRule(ADMIN),
    _RECALL + "WatchMemoryEvents": MethodRule(READ),
    # audit (served by recall).
    _AUDIT + "History": MethodRule(READ),
    _AUDIT + "ListAudit": MethodRule(ADMIN),
    _AUDIT + "VerifyAudit": MethodRule(ADMIN),
    # enrich.
    _ENRICH + "ReprocessMemories": MethodRule(ADMIN),
    _ENRICH + "GetEnrichmentStatus": MethodRule(READ),
    _ENRICH + "ReembedMemories": MethodRule(ADMIN),
    # consolidate: runs, and a tenant's backups (every tenant's: an operator's).
    _CONSOLIDATE + "RunConsolidation": MethodRule(WRITE, EVERY_TENANT),
    _CONSOLIDATE + "GetConsolidationStatus": MethodRule(READ),
    _CONSOLIDATE + "CreateBackup": MethodRule(ADMIN, EVERY_TENANT),
    _CONSOLIDATE + "ListBackups": MethodRule(ADMIN),
    _CONSOLIDATE + "ReadBackup": MethodRule(ADMIN),
    _CONSOLIDATE + "UploadBackup": MethodRule(ADMIN),
    _CONSOLIDATE + "RestoreBackup": MethodRule(ADMIN, EVERY_TENANT + UNSIGNED),
}


def rule_of(method: str) -> MethodRule | None:
    """What a call to `method` (its full gRPC name) needs; None: not in the table (refused)."""
    return METHOD_RULES.get(method)


def refusal(rule: MethodRule, claim, request) -> str | None:
    """Why `claim` may not make this call (a message naming the role, and
    the field when a set field is what needs it); None when it may."""
    if not claim.allows(rule.role):
        return f"this call needs the '{rule.role}' role; the claim's role is '{claim.role}'"
    for field, role in rule.raised_by:
        if getattr(request, field, False) and not claim.allows(role):
            return f"'{field}' needs the '{role}' role; the claim's role is '{claim.role}'"
    if claim.tenant is None and not claim.allows(rule.no_tenant):
        return f"a call on no tenant's behalf needs the '{rule.no_tenant}' role"
    return None
