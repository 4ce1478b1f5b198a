"""The REST routes, one module per resource."""

from fastapi import APIRouter

from gateway.routes import admin, associations, consolidation, enrichment, graph, health, memories, recall, stream

router = APIRouter()
router.include_router(health.router)
router.include_router(memories.router)
router.include_router(associations.router)
router.include_router(enrichment.router)
router.include_router(recall.router)
router.include_router(graph.router)
router.include_router(admin.router)
router.include_router(consolidation.router)
router.include_router(stream.router)
