"""The REST routes, one module per resource, beside what they share: roles
(the role a route needs), calls (service stubs, call options), body (JSON
bodies) and query (query parameters).

ROUTES lists them all, for the app to add as they are: FastAPI's
include_router would serve an included route through a handler of its own
making, not the route's (see gateway/responses.py JsonRoute)."""

from fastapi.routing import APIRoute

from gateway.routes import (
    admin,
    associations,
    audit,
    backups,
    consolidation,
    enrichment,
    graph,
    health,
    memories,
    memory_create,
    recall,
    review,
    session,
    stream,
    tombstones,
)

ROUTES: list[APIRoute] = [
    route
    for module in (
        health,
        memory_create,
        memories,
        associations,
        enrichment,
        recall,
        graph,
        admin,
        backups,
        consolidation,
        stream,
        review,
        tombstones,
        audit,
        session,
    )
    for route in module.router.routes
]
