"""The parameter text a query is sent with: ours is the library's, faster."""

from __future__ import annotations

import pytest
from falkordb.helpers import stringify_param_value
from hypothesis import given
from hypothesis import strategies as st

from services.core.adapters.falkor.reply import param_text, params_header

_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
_keys = st.text(min_size=1).filter(lambda k: "`" not in k)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner) | st.dictionaries(_keys, inner, max_size=4),
    max_leaves=20,
)


@given(_values)
def test_param_text_is_the_librarys(value):
    assert param_text(value) == stringify_param_value(value)


@pytest.mark.parametrize(
    "value",
    ['quote " and backslash \\', "", b"bytes", {1: "int key"}, {"k": b"v"}, [b"x", ("t",)], 10**30],
)
def test_what_it_leaves_to_the_library_comes_out_the_same(value):
    assert param_text(value) == stringify_param_value(value)


@pytest.mark.parametrize("key", ["", "back`tick"])
def test_a_key_the_library_refuses_is_refused(key):
    with pytest.raises(ValueError):
        param_text({key: 1})


def test_the_header_names_each_parameter():
    assert params_header({"a": 1, "rows": [{"id": "x"}]}) == 'CYPHER a=1 rows=[{`id`:"x"}] '
