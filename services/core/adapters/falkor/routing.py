"""Which graph a query goes to (FALKORDB_GRAPH_LAYOUT; domain/graph_layout.py).

Every query of the package filters on its tenant, so the tenant is in its
parameters: `$tenant` (what its WHERE compares, so it decides), else a
`tenant` inside the rows it writes. A query is sent to the graph that
tenant's layout names; a query of several tenants
must have them all in one graph (one query is one commit, and one commit is
one graph). A query that names no tenant (the relay's sweep, a health count,
the schema) says which graph it means: the cross-tenant ports visit every
graph of the layout in turn.
"""

from __future__ import annotations

from typing import Any

from services.core.domain.graph_layout import GraphLayout


class UnroutedQuery(Exception):
    """A query whose graph cannot be told from its tenant: a bug in the caller, never a user's error."""


def tenants_in(params: Any, found: set[str] | None = None) -> set[str]:
    """Every `tenant` value in a query's parameters, nested rows and lists included."""
    found = set() if found is None else found
    if isinstance(params, dict):
        for key, value in params.items():
            if key == "tenant" and isinstance(value, str):
                found.add(value)
            elif isinstance(value, (dict, list, tuple)):
                tenants_in(value, found)
    elif isinstance(params, (list, tuple)):
        for value in params:
            if isinstance(value, (dict, list, tuple)):
                tenants_in(value, found)
    return found


class GraphRouter:
    """Names the graph of each query under one layout."""

    def __init__(self, layout: GraphLayout):
        self.layout = layout
        #: Shared: one graph, nothing to look for (today's path, unchanged).
        self._single = layout.graphs() == (layout.base,)

    @property
    def single(self) -> bool:
        """Whether every tenant shares one graph."""
        return self._single

    def route(self, params: dict[str, Any] | None, *, tenant: str | None = None, graph: str | None = None) -> str:
        """The graph a query goes to: `graph` when given, else `tenant`'s, else that of the tenants in `params`."""
        if graph is not None:
            return graph
        if self._single:
            return self.layout.base
        if tenant is None and params and isinstance(params.get("tenant"), str):
            tenant = params["tenant"]
        if tenant is not None:
            return self.layout.graph_for(tenant)
        graphs = {self.layout.graph_for(t) for t in tenants_in(params)}
        if len(graphs) == 1:
            return graphs.pop()
        if not graphs:
            raise UnroutedQuery("the query names no tenant: say which graph it is for (graph=) or visit every graph")
        raise UnroutedQuery(f"the query spans {len(graphs)} graphs: split it by graph (FalkorConnection.by_graph)")

    def by_graph(self, items: list, tenant_of) -> dict[str, list]:
        """`items` grouped by the graph of each one's tenant (`tenant_of(item)`), in their order."""
        groups: dict[str, list] = {}
        for item in items:
            groups.setdefault(self.route(None, tenant=tenant_of(item)), []).append(item)
        return groups
