"""The benchmarks' stack: a devstack that cannot start is reported with why
and with what it printed, after one more try on fresh ports."""

from __future__ import annotations

import pytest

from benchmarks.stack import BenchStack


def test_a_stack_that_exits_at_once_is_tried_again_and_then_reported_with_its_output(capsys):
    stack = BenchStack("--no-such-option")
    first_port = stack.env["PORT"]
    with pytest.raises(RuntimeError) as raised:
        stack.__enter__()
    message = str(raised.value)
    assert "devstack exited with 2" in message
    assert "unrecognized arguments: --no-such-option" in message  # devstack's own output
    assert "starting again on fresh ports" in capsys.readouterr().err
    assert stack.env["PORT"] != first_port  # the second try had ports of its own
    assert not stack.data.exists()  # and nothing is left behind


def test_a_port_given_by_the_caller_survives_a_fresh_pick():
    stack = BenchStack(PORT="12345")
    stack._pick_ports()
    assert stack.env["PORT"] == "12345" and stack.url.endswith(":12345")
    assert stack.env["RECALL_GRPC_PORT"] != "12345"
