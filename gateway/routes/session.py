"""GET /whoami: the caller a token stands for (its tenant, role and id), so a
client such as the web console can say up front what the token may do,
rather than learn it from a 403 after a click."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from gateway.auth import Caller, presented_admin_token
from gateway.envelope import ApiError
from gateway.openapi import BOOLEAN, STRING, doc, obj
from gateway.responses import JsonRoute
from gateway.routes.roles import require
from gateway.tokens_file import ROLES

router = APIRouter(route_class=JsonRoute)

WHOAMI = obj(
    {
        "status": {"const": "success"},
        "tenant": STRING,
        "role": {**STRING, "enum": list(ROLES)},
        "token_id": {**STRING, "description": "The audit log's actor for this token, never the token."},
        "operator": BOOLEAN,
    },
    ("status", "tenant", "role", "token_id", "operator"),
)


@router.get("/whoami", **doc(ok=WHOAMI))
async def whoami(request: Request, who: Caller = Depends(require("read"))):
    """The token's tenant and role (each role includes the ones before it:
    read, write, review, admin, operator); the single-tenant token with a
    valid X-Admin-Token is an operator, as the routes that need one treat it."""
    if who.legacy and presented_admin_token(request):
        try:
            who = request.app.state.auth.authorize(request, "operator")
        except ApiError as exc:
            if exc.code != 403:
                raise
    return {
        "status": "success",
        "tenant": who.tenant,
        "role": who.role,
        "token_id": who.token_id,
        "operator": who.operator,
    }
