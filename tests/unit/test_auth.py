"""gateway.auth: where the token comes from, checking it, and the token file."""

from __future__ import annotations

import stat

import pytest
from starlette.requests import Request

from gateway.auth import TOKEN_FILE_NAME, TokenAuth, load_or_create_token, presented_token
from gateway.envelope import ApiError
from services.core.settings import Settings

TOKEN = "s3cret-token"


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
    # The tenant the gateway wires in by default (gateway.app passes settings.default_tenant).
    return TokenAuth(TOKEN, Settings.model_fields["default_tenant"].default)


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
