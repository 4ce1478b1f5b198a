"""POST /associate: one association, or a batch of up to 500."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from gateway.auth import Caller
from gateway.envelope import ApiError
from gateway.openapi import STRING, TIME, doc, obj, ref
from gateway.responses import Json, JsonRoute
from gateway.routes.body import json_body
from gateway.routes.calls import call_options, clients
from gateway.routes.roles import require
from gateway.translate import association_from_json, association_to_json, iso, require_object
from memgrid.v1 import ingest_service_pb2 as ingest

router = APIRouter(route_class=JsonRoute)

CREATED = {
    "anyOf": [
        {
            "allOf": [
                ref("Association"),
                obj({"status": {"const": "success"}, "message": STRING, "created_at": TIME}, ("status", "message")),
            ]
        },
        ref("AssociationBatchResult"),
    ]
}
BODY = {
    "anyOf": [
        ref("AssociationIn"),
        obj(
            {"associations": {"type": "array", "items": ref("AssociationIn"), "minItems": 1, "maxItems": 500}},
            ("associations",),
        ),
    ]
}


@router.post(
    "/associate",
    status_code=201,
    **doc(
        ok=CREATED,
        status=201,
        body=BODY,
        responses={
            207: ("A batch of which some associations failed (each named by index).", ref("AssociationBatchResult")),
            400: (
                "Invalid input, or a batch of which every association failed: the envelope, then with "
                "created_count, failed_count, succeeded and failed too.",
                ref("Error"),
            ),
        },
    ),
)
async def associate(request: Request, who: Caller = Depends(require("write"))):
    """One association (memory1_id, memory2_id, type, strength, properties),
    or a batch under `associations`: 201, 207 with per-item failures, or 400."""
    body = require_object(await json_body(request))
    if "associations" not in body:
        for field in ("memory1_id", "memory2_id"):
            # Text that is no memory id is a 404 (as AutoMem answers); a number, list or object is no text at all.
            if body.get(field) is not None and not isinstance(body[field], str):
                raise ApiError(400, f"'{field}' must be a string (a memory id)", "INVALID_ID")
        reply = await clients(request).ingest.CreateAssociation(
            ingest.CreateAssociationRequest(association=association_from_json(body)), **call_options(request, who)
        )
        created = association_to_json(reply.association)
        result = {
            "status": "success",
            "message": f"Association {reply.association.type} created",
            **created,
            "created_at": iso(reply, "created_at"),
        }
        # AutoMem answers each of the type's properties beside strength, as well as under properties.
        result.update({k: v for k, v in created["properties"].items() if k not in result})
        return Json(result, status_code=201)
    items = body["associations"]
    if not isinstance(items, list):
        raise ApiError(400, "'associations' must be a list", "NOT_A_LIST")
    associations = [association_from_json(item, where=f"association at index {i}: ") for i, item in enumerate(items)]
    reply = await clients(request).ingest.BatchCreateAssociations(
        ingest.BatchCreateAssociationsRequest(associations=associations), **call_options(request, who)
    )
    result = {
        "created_count": len(reply.succeeded),
        "failed_count": len(reply.failed),
        "succeeded": [association_to_json(a) for a in reply.succeeded],
        "failed": [{"index": f.index, "reason": f.reason} for f in reply.failed],
    }
    if not reply.failed:
        return Json({"status": "success", **result}, status_code=201)
    if reply.succeeded:
        return Json({"status": "partial_success", **result}, status_code=207)
    message = "no association was created"
    return Json({"status": "error", "code": 400, "message": message, **result}, status_code=400)
