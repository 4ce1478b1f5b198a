"""gateway.auth: where the token comes from, checking it, and the token file."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat

import pytest
from fastapi.routing import APIRoute
from starlette.requests import Request

from gateway.app import create_app
from gateway.auth import TOKEN_FILE_NAME, Caller, TokenAuth, load_or_create_token, presented_token, role_allows
from gateway.envelope import ApiError
from gateway.routes.roles import require
from gateway.tokens_file import (
    ROLES,
    TokenEntry,
    TokensFile,
    TokensFileError,
    mint_token,
    parse_tokens,
    token_digest,
)
from services.core.settings import GatewaySettings, Settings

TOKEN = "s3cret-token"
#: Routes only admins reach, besides everything under /admin and /backup
#: (POST /consolidate is a writer's; its every_tenant an admin's, checked in the route).
ADMIN_ROUTES = {("POST", "/enrichment/reprocess"), ("POST", "/restore"), ("GET", "/audit")}
#: The human review's routes: the review role, GET included (the queue shows what recall withholds).
REVIEW_ROUTES = {("GET", "/review"), ("POST", "/review/{memory_id}/approve"), ("POST", "/review/{memory_id}/reject")}
#: Routes that read although their method is not GET (a query too large for a URL, say).
READ_ONLY_ROUTES: set[tuple[str, str]] = set()


def make_request(headers: dict[str, str] | None = None, query: str = "") -> Request:
    scope = {
        "type": "http",
        "method": "GET",
        "path": "/recall",
        "query_string": query.encode(),
        "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()],
    }
    return Request(scope)


@pytest.fixture
def auth() -> TokenAuth:
    # The tenant the gateway wires in by default (gateway.app passes settings.gateway.default_tenant).
    return TokenAuth(TOKEN, GatewaySettings.model_fields["default_tenant"].default)


@pytest.mark.parametrize(
    ("headers", "query"),
    [
        ({"Authorization": f"Bearer {TOKEN}"}, ""),
        ({"Authorization": f"bearer {TOKEN}"}, ""),
        ({"X-API-Key": TOKEN}, ""),
        ({}, f"api_key={TOKEN}"),
        ({}, f"limit=5&api_key={TOKEN}"),
    ],
)
def test_presented_token_from_each_place(headers, query):
    assert presented_token(make_request(headers, query)) == TOKEN


def test_bearer_header_takes_precedence():
    request = make_request({"Authorization": "Bearer from-bearer", "X-API-Key": "from-header"}, "api_key=from-query")
    assert presented_token(request) == "from-bearer"


def test_x_api_key_before_query_parameter():
    assert presented_token(make_request({"X-API-Key": "from-header"}, "api_key=from-query")) == "from-header"


def test_non_bearer_authorization_falls_back_to_other_places():
    assert presented_token(make_request({"Authorization": "Basic dXNlcjpwdw==", "X-API-Key": TOKEN})) == TOKEN


@pytest.mark.parametrize(("headers", "query"), [({}, ""), ({"Authorization": "Basic abc"}, ""), ({}, "api_key=")])
def test_no_token_presented(headers, query):
    assert presented_token(make_request(headers, query)) is None


def test_missing_token_is_401(auth):
    with pytest.raises(ApiError) as caught:
        auth.authenticate(make_request())
    assert caught.value.code == 401


@pytest.mark.parametrize(
    ("headers", "query"),
    [
        ({"Authorization": "Bearer wrong"}, ""),
        ({"X-API-Key": TOKEN + "x"}, ""),
        ({}, "api_key=" + TOKEN[:-1]),
    ],
)
def test_wrong_token_is_401(auth, headers, query):
    with pytest.raises(ApiError) as caught:
        auth.authenticate(make_request(headers, query))
    assert caught.value.code == 401


@pytest.mark.parametrize(
    ("headers", "query"),
    [({"Authorization": f"Bearer {TOKEN}"}, ""), ({"X-API-Key": TOKEN}, ""), ({}, f"api_key={TOKEN}")],
)
def test_right_token_gives_the_default_tenant(auth, headers, query):
    caller = auth.authenticate(make_request(headers, query))
    assert caller.tenant == "default"


def test_token_file_is_created_once_and_private(tmp_path):
    data_dir = tmp_path / "data" / "nested"
    token, created = load_or_create_token(data_dir)
    assert created is True
    assert len(token) >= 32
    path = data_dir / TOKEN_FILE_NAME
    assert path.read_text().strip() == token
    assert stat.S_IMODE(path.stat().st_mode) == 0o600

    again, created_again = load_or_create_token(data_dir)
    assert (again, created_again) == (token, False)


def test_tokens_differ_between_data_dirs(tmp_path):
    first, _ = load_or_create_token(tmp_path / "a")
    second, _ = load_or_create_token(tmp_path / "b")
    assert first != second


def test_an_existing_token_file_is_used(tmp_path):
    (tmp_path / TOKEN_FILE_NAME).write_text("  my-token\n")
    assert load_or_create_token(tmp_path) == ("my-token", False)


def test_an_empty_token_file_is_replaced_by_a_new_token(tmp_path):
    (tmp_path / "api_token").write_text("\n")
    token, created = load_or_create_token(tmp_path)
    assert created and len(token) >= 32
    assert (tmp_path / "api_token").stat().st_mode & 0o777 == 0o600


# The tokens file: many tenants, each token with a role -------------------------------------------------


def sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def entry(token: str, tenant: str = "acme", role: str = "write", **extra) -> dict:
    return {"token_sha256": sha(token), "tenant": tenant, "role": role, **extra}


def write_tokens(path, entries) -> None:
    path.write_text(entries if isinstance(entries, str) else json.dumps(entries))


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def bearer(token: str) -> Request:
    return make_request({"Authorization": f"Bearer {token}"})


def test_parse_tokens_reads_every_field():
    entries = parse_tokens(json.dumps([entry("t1", memory_limit=10), entry("t2", "beta", "admin")]))
    assert entries[token_digest("t1")] == TokenEntry(token_digest("t1"), "acme", "write", 10)
    assert entries[token_digest("t2")].role == "admin" and entries[token_digest("t2")].memory_limit is None


def test_a_token_s_id_names_it_in_the_audit_log_and_never_the_token():
    entries = parse_tokens(json.dumps([entry("t1", id="ci-bot"), entry("t2")]))
    assert entries[token_digest("t1")].token_id == "ci-bot"
    assert entries[token_digest("t2")].token_id == f"sha256-{sha('t2')[:12]}"
    for bad in ("system:ingest", "", "x" * 65, 7):
        with pytest.raises(TokensFileError, match="'id'"):
            parse_tokens(json.dumps([entry("t1", id=bad)]))


def test_an_uppercase_digest_is_accepted():
    entries = parse_tokens(json.dumps([{**entry("t1"), "token_sha256": sha("t1").upper()}]))
    assert token_digest("t1") in entries


@pytest.mark.parametrize(
    ("content", "names"),
    [
        ("{not json", "not valid JSON"),
        ('{"token_sha256": "x"}', "JSON list"),
        ('["x"]', "entry 0 must be a JSON object"),
        (json.dumps([entry("a"), {"tenant": "acme", "role": "read"}]), "entry 1: 'token_sha256'"),
        (json.dumps([{**entry("a"), "token_sha256": "raw-secret-token"}]), "64 hex"),
        (json.dumps([entry("a", tenant="")]), "'tenant'"),
        (json.dumps([entry("a", tenant="a.b")]), "'tenant'"),
        (json.dumps([entry("a", tenant=7)]), "'tenant'"),
        (json.dumps([entry("a", role="owner")]), "'role' must be one of read, write, review, admin, operator"),
        (json.dumps([entry("a", role="operator")]), "an 'operator' entry belongs to no tenant"),
        (json.dumps([{"token_sha256": sha("a"), "role": "operator", "memory_limit": 5}]), "belongs to no tenant"),
        (json.dumps([{"token_sha256": sha("a"), "role": "admin"}]), "entry 0: 'tenant' is required"),
        (json.dumps([{"token_sha256": sha("a"), "tenant": None, "role": "read"}]), "'tenant' is required"),
        (json.dumps([entry("a", memory_limit=-1)]), "'memory_limit'"),
        (json.dumps([entry("a", memory_limit=1.5)]), "'memory_limit'"),
        (json.dumps([entry("a", memory_limit=True)]), "'memory_limit'"),
        (json.dumps([entry("a", memory_limt=5)]), "unknown field(s) memory_limt"),
        (json.dumps([entry("a"), entry("a", tenant="other")]), "entry 1: the same token_sha256 appears twice"),
    ],
)
def test_a_malformed_tokens_file_is_refused_naming_the_problem(content, names):
    with pytest.raises(TokensFileError) as caught:
        parse_tokens(content)
    assert names in str(caught.value)
    assert "raw-secret-token" not in str(caught.value)  # values are never echoed


def test_a_malformed_file_at_start_up_is_an_error_naming_the_path(tmp_path):
    path = tmp_path / "tokens.json"
    write_tokens(path, [entry("a", role="root")])
    with pytest.raises(TokensFileError) as caught:
        TokensFile(path)
    assert str(path) in str(caught.value) and "'role'" in str(caught.value)
    with pytest.raises(TokensFileError, match="cannot be read"):
        TokensFile(tmp_path / "missing.json")


def test_create_app_refuses_an_unusable_tokens_file(tmp_path):
    path = tmp_path / "tokens.json"
    write_tokens(path, "[")
    settings = Settings(_env_file=None, memgrid_tokens_file=path)
    with pytest.raises(TokensFileError):
        create_app(settings, None)


@pytest.fixture
def tokens_path(tmp_path):
    path = tmp_path / "tokens.json"
    write_tokens(path, [entry("alpha-reader", "alpha", "read"), entry("beta-admin", "beta", "admin", memory_limit=7)])
    return path


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def multi(tokens_path, clock) -> TokenAuth:
    tokens = TokensFile(tokens_path, check_seconds=1.0, clock=clock)
    return TokenAuth(TOKEN, "default", "admin-secret", tokens=tokens, memory_limit=100)


def test_a_file_token_gives_its_tenant_role_and_limit(multi):
    assert multi.authenticate(bearer("alpha-reader")) == Caller("alpha", "read", 100)
    assert multi.authenticate(make_request({"X-API-Key": "beta-admin"})) == Caller("beta", "admin", 7)
    assert multi.authenticate(make_request(query="api_key=beta-admin")).tenant == "beta"


def test_both_sources_work_at_once(multi):
    assert multi.authenticate(bearer(TOKEN)) == Caller("default", "write", 100, legacy=True)
    with pytest.raises(ApiError) as caught:
        multi.authenticate(bearer("nobody"))
    assert caught.value.code == 401


def test_only_a_tokens_file(tokens_path):
    auth = TokenAuth(None, "default", tokens=TokensFile(tokens_path))
    assert auth.authenticate(bearer("alpha-reader")).tenant == "alpha"
    for token in ("", "None", TOKEN):
        with pytest.raises(ApiError) as caught:
            auth.authenticate(bearer(token) if token else make_request())
        assert caught.value.code == 401


def test_the_file_is_reread_once_it_changes_and_the_check_is_throttled(multi, tokens_path, clock):
    write_tokens(tokens_path, [entry("gamma-writer", "gamma", "write"), entry("alpha-reader", "alpha", "admin")])
    # Within the interval the old file is still in force ...
    assert multi.authenticate(bearer("alpha-reader")).role == "read"
    with pytest.raises(ApiError):
        multi.authenticate(bearer("gamma-writer"))
    # ... and after it, the new one: tokens added, roles changed, tokens revoked.
    clock.now += 1.5
    assert multi.authenticate(bearer("gamma-writer")) == Caller("gamma", "write", 100)
    assert multi.authenticate(bearer("alpha-reader")).role == "admin"
    with pytest.raises(ApiError) as caught:
        multi.authenticate(bearer("beta-admin"))
    assert caught.value.code == 401


def test_a_change_keeping_size_and_mtime_is_still_seen_through_the_inode(multi, tokens_path, clock):
    replacement = tokens_path.with_suffix(".new")
    write_tokens(
        replacement, [entry("alpha-reader", "alphb", "read"), entry("beta-admin", "beta", "admin", memory_limit=7)]
    )
    before = tokens_path.stat()
    os.utime(replacement, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert replacement.stat().st_size == before.st_size
    os.replace(replacement, tokens_path)  # an atomic replace: a new inode
    clock.now += 2
    assert multi.authenticate(bearer("alpha-reader")).tenant == "alphb"


def test_a_bad_reload_keeps_the_last_good_file_and_warns_once(multi, tokens_path, clock, capsys):
    write_tokens(tokens_path, '[{"token_sha256": "' + "f" * 10 + '"')  # half-written
    clock.now += 2
    assert multi.authenticate(bearer("alpha-reader")).tenant == "alpha"
    clock.now += 2
    assert multi.authenticate(bearer("beta-admin")).tenant == "beta"
    warnings = [line for line in capsys.readouterr().out.splitlines() if "tokens file refused" in line]
    assert len(warnings) == 1 and "alpha-reader" not in warnings[0]
    tokens_path.unlink()  # a missing file is refused too
    clock.now += 2
    assert multi.authenticate(bearer("alpha-reader")).tenant == "alpha"
    write_tokens(tokens_path, [entry("alpha-reader", "alpha", "review")])
    clock.now += 2
    assert multi.authenticate(bearer("alpha-reader")).role == "review"
    with pytest.raises(ApiError):
        multi.authenticate(bearer("beta-admin"))


def test_lookup_compares_digests_in_constant_time(tokens_path, monkeypatch):
    """The presented token is hashed and the digest confirmed with
    hmac.compare_digest; the raw token is never compared."""
    compared = []
    real = hmac.compare_digest

    def spy(a, b):
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr("gateway.tokens_file.hmac.compare_digest", spy)
    monkeypatch.setattr("gateway.auth.hmac.compare_digest", spy)
    auth = TokenAuth(TOKEN, "default", tokens=TokensFile(tokens_path))
    auth.authenticate(bearer("alpha-reader"))
    auth.authenticate(bearer(TOKEN))
    assert compared and all(len(a) == len(b) == 32 for a, b in compared)
    assert all(b"alpha-reader" not in (a, b) and TOKEN.encode() not in (a, b) for a, b in compared)


# Roles ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("role", "allowed"),
    [
        ("read", {"read"}),
        ("write", {"read", "write"}),
        ("review", {"read", "write", "review"}),
        ("admin", {"read", "write", "review", "admin"}),
        ("operator", {"read", "write", "review", "admin", "operator"}),
    ],
)
def test_each_role_includes_the_ones_before_it(role, allowed):
    assert {needed for needed in ROLES if role_allows(role, needed)} == allowed


def test_a_role_without_the_right_is_403_naming_both_roles(multi):
    multi.authorize(bearer("alpha-reader"), "read")
    with pytest.raises(ApiError) as caught:
        multi.authorize(bearer("alpha-reader"), "write")
    assert caught.value.code == 403 and "'read'" in caught.value.message and "'write'" in caught.value.message
    assert multi.authorize(bearer("beta-admin"), "admin").role == "admin"


def test_no_token_is_401_before_any_role_check(multi):
    with pytest.raises(ApiError) as caught:
        multi.authorize(make_request(), "read")
    assert caught.value.code == 401


def test_the_single_tenant_token_needs_x_admin_token_for_admin_routes(multi):
    with pytest.raises(ApiError) as caught:
        multi.authorize(bearer(TOKEN), "admin")
    assert caught.value.code == 403
    wrong = make_request({"Authorization": f"Bearer {TOKEN}", "X-Admin-Token": "guess"})
    with pytest.raises(ApiError):
        multi.authorize(wrong, "admin")
    right = make_request({"Authorization": f"Bearer {TOKEN}", "X-Admin-Token": "admin-secret"})
    # The single token's admin is the operator (across tenants), as it always was in a one-token setup.
    assert multi.authorize(right, "admin") == Caller("default", "operator", 100, legacy=True, operator=True)
    assert multi.authorize(right, "operator").operator


def test_an_operator_entry_belongs_to_no_tenant_and_a_tenant_s_admin_is_no_operator(tmp_path):
    path = tmp_path / "tokens.json"
    write_tokens(
        path, [{"token_sha256": sha("ops"), "role": "operator", "id": "ops"}, entry("alpha-admin", "alpha", "admin")]
    )
    auth = TokenAuth(None, "default", tokens=TokensFile(path))
    operator = auth.authorize(bearer("ops"), "operator")
    assert (operator.tenant, operator.role, operator.operator, operator.token_id) == (
        "default",
        "operator",
        True,
        "ops",
    )
    admin = auth.authorize(bearer("alpha-admin"), "admin")
    assert (admin.tenant, admin.operator) == ("alpha", False)
    with pytest.raises(ApiError) as caught:
        auth.authorize(bearer("alpha-admin"), "operator")
    assert caught.value.code == 403 and "'operator'" in caught.value.message


def test_x_admin_token_raises_no_tokens_file_role(multi):
    request = make_request({"Authorization": "Bearer alpha-reader", "X-Admin-Token": "admin-secret"})
    with pytest.raises(ApiError) as caught:
        multi.authorize(request, "admin")
    assert caught.value.code == 403


def test_without_admin_api_token_admin_routes_are_closed_to_the_single_token():
    auth = TokenAuth(TOKEN, "default")
    with pytest.raises(ApiError) as caught:
        auth.authorize(make_request({"Authorization": f"Bearer {TOKEN}", "X-Admin-Token": ""}), "admin")
    assert caught.value.code == 403 and "ADMIN_API_TOKEN" in caught.value.message


def test_require_refuses_an_unknown_role():
    with pytest.raises(ValueError):
        require("owner")


def test_every_route_but_health_requires_a_role():
    """Scope on every path: a route added without `Depends(require(...))` fails here."""
    app = create_app(Settings(_env_file=None), TOKEN)

    def walk(routes):
        for route in routes:
            if hasattr(route, "original_router"):  # FastAPI's included routers
                yield from walk(route.original_router.routes)
            else:
                yield route

    roles = {}
    for route in walk(app.routes):
        if isinstance(route, APIRoute):
            found = [d.call.role for d in route.dependant.dependencies if hasattr(d.call, "role")]
            for method in route.methods:
                roles[(method, route.path)] = found
    assert roles.pop(("GET", "/health")) == []
    assert all(len(found) == 1 for found in roles.values()), {k: v for k, v in roles.items() if len(v) != 1}
    for (method, path), (role,) in roles.items():
        if (method, path) in ADMIN_ROUTES or path.startswith(("/admin", "/backup")):
            assert role == "admin", (method, path)
        elif (method, path) in REVIEW_ROUTES:
            assert role == "review", (method, path)
        elif method == "GET" or (method, path) in READ_ONLY_ROUTES:
            assert role == "read", (method, path)
        else:
            assert role in ("write", "review"), (method, path)
    assert roles[("POST", "/enrichment/reprocess")] == ["admin"]


def test_a_minted_token_never_starts_with_a_dash(monkeypatch):
    """A shell reads '-x...' as an option: such a draw is thrown away and another taken."""
    draws = iter(["-starts-like-an-option", "_fine-token"])
    monkeypatch.setattr("gateway.tokens_file.secrets.token_urlsafe", lambda nbytes: next(draws))
    assert mint_token() == "_fine-token"
    monkeypatch.undo()
    minted = [mint_token(8) for _ in range(2000)]
    assert not any(t.startswith("-") for t in minted) and len(set(minted)) == 2000
