"""GET /recall declares each query parameter once (gateway/routes/recall_params.py):
its OpenAPI entries and the SearchMemoriesRequest it sends both come from that table."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from starlette.requests import Request

from gateway.app import create_app
from gateway.routes.recall_params import RECALL_PARAMETERS, openapi_parameters, search_request
from memgrid.v1 import recall_service_pb2 as recall
from services.core.settings import Settings

#: A value each kind of reader takes, by the parameter's OpenAPI type.
SAMPLES = {"boolean": "true", "number": "0.5", "integer": "3", "array": "a,b"}


@pytest.fixture(scope="module")
def app():
    return create_app(Settings(_env_file=None), "unit-token")


def _request(app, **params: str) -> Request:
    scope = {"type": "http", "method": "GET", "path": "/recall", "headers": [], "app": app}
    return Request({**scope, "query_string": urlencode(params).encode()})


def _sample(parameter) -> str:
    schema = parameter.entry(parameter.name, "")["schema"]
    if parameter.name == "embedding":
        return "1,2"
    return SAMPLES.get(schema.get("type"), "0.5" if "anyOf" in schema else "x")


def test_the_openapi_entries_are_the_tables(app):
    described = app.openapi()["paths"]["/recall"]["get"]["parameters"]
    assert described == list(openapi_parameters())
    names = [p["name"] for p in described]
    assert names == [name for p in RECALL_PARAMETERS for name in (p.name, *p.aliases)]
    assert len(names) == len(set(names))


def test_every_request_field_is_one_parameter_of_the_table():
    fields = [p.field for p in RECALL_PARAMETERS if p.field is not None]
    assert sorted(fields) == sorted(recall.SearchMemoriesRequest.DESCRIPTOR.fields_by_name)


@pytest.mark.parametrize("parameter", [p for p in RECALL_PARAMETERS if p.field], ids=lambda p: p.name)
def test_each_name_of_a_parameter_fills_its_field(app, parameter):
    for name in parameter.names:
        search = search_request(_request(app, **{name: _sample(parameter)}))
        assert search.ListFields() and search.ListFields()[0][0].name == parameter.field, name
    assert search_request(_request(app)) == recall.SearchMemoriesRequest()


def test_an_ignored_parameter_fills_nothing(app):
    ignored = [p.name for p in RECALL_PARAMETERS if p.field is None]
    assert ignored == ["format", "offset"]
    assert search_request(_request(app, format="detailed", offset="3")) == recall.SearchMemoriesRequest()
