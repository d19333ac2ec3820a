"""Grading fails closed: what comes back from a submission is believed only when it is whole.

Each attack is a wrong answer (it returns `x * 0` or the input untransposed) that tries to pass
by tampering with what the parent decodes: the runner's own modules in the job's process, a
frame written by hand, a frame built to stall or bloat the parent. Every test grades through
the real HTTP runner and ends by grading a correct answer (`grade_then_recover`).
"""
from __future__ import annotations

import asyncio
import json

import pytest

from runner.client import RunnerClient
from tests.runner.jobs import CORRECT, job
from tests.runner.test_hostile import grade_then_recover

pytestmark = pytest.mark.asyncio

ONE_CASE = "def make_cases():\n    return [{'args': (torch.randn(3, 4),), 'name': 'one'}]\n"
# The wrong answer every forger starts from: right shape and dtype, wrong values.
WRONG = "def solve(x):\n    return x.t() * 0\n"


def _frame_writer(header_expr: str, blobs_expr: str = "b''") -> str:
    """A submission that writes its own frame (header JSON as given, then blobs) and exits."""
    return (
        "import os, json, struct\n"
        "def solve(x):\n"
        f"    header = {header_expr}\n"
        f"    blobs = {blobs_expr}\n"
        "    text = json.dumps(header).encode()\n"
        "    os.write(3, b'QZW1' + struct.pack('<I', len(text)) + text + blobs)\n"
        "    os._exit(0)\n")


def _tensor_node(shape: list[int], blob: int | None = None) -> dict:
    node = {"t": "tensor", "kind": "Tensor", "dtype": "float32", "shape": shape, "device": "cpu",
            "requires_grad": False, "layout": "strided"}
    if blob is not None:
        node["blob"] = blob
    return node


def _case(obs: dict) -> dict:
    return {"name": "one", "example": False, "obs": {"t": "dict", "v": [["result", obs]]}, "error": None}


async def test_a_wire_module_that_drops_values_does_not_pass(runner_client: RunnerClient) -> None:
    """Emptying the encoder's dtype table used to send tensors as shape and dtype only, and the
    parent then skipped the values: a wrong answer with the right shape passed."""
    r = await grade_then_recover(runner_client, job("import runner.wire as w\nw.DTYPES.clear()\n" + WRONG))
    assert r["verdict"] in ("failed", "error"), r
    assert r["passed_cases"] == 0, r


async def test_wrapping_the_encoder_is_tampering(runner_client: RunnerClient) -> None:
    """An encoder wrapped to swap the wrong result for a made-up one fails like a patched
    torch.allclose: the harness and the wire module are covered by the same restore-and-check."""
    cheat = ("import runner.wire as w\n_orig = w.Encoder.encode\n"
             "def encode(self, value, depth=0):\n"
             "    if isinstance(value, dict) and 'result' in value:\n"
             "        value = {'result': value['result'] + 1}\n"
             "    return _orig(self, value, depth)\n"
             "w.Encoder.encode = encode\n" + WRONG)
    r = await grade_then_recover(runner_client, job(cheat, setup=ONE_CASE))
    assert r["verdict"] == "failed", r
    assert "runner.wire.Encoder.encode" in r["message"], r


async def test_patching_the_harness_restore_is_tampering(runner_client: RunnerClient) -> None:
    cheat = ("import runner.harness as h\nh.TorchSnapshot.restore = lambda self: []\n"
             "torch.allclose = lambda *a, **k: True\n" + WRONG)
    probe = "def probe(result, args, kwargs, call):\n    return {'ok': torch.allclose(result, args[0].t())}\n"
    r = await grade_then_recover(runner_client, job(cheat, probe=probe, setup=ONE_CASE))
    assert r["verdict"] == "failed", r
    assert "runner.harness.TorchSnapshot.restore" in r["message"] or "torch.allclose" in r["message"], r


_NODE = _tensor_node([4, 3])
_CASE = _case(_NODE)
_HEAD = {"status": "ok", "error": None, "tampered": [], "blobs": []}


@pytest.mark.parametrize("header", [
    dict(_HEAD, cases=[_CASE]),                                      # a tensor without its values
    dict(_HEAD, cases=[_CASE, _CASE]),                               # the case count is not the job's
    dict(_HEAD, cases=[]),
    dict(_HEAD, cases=[dict(_CASE, obs=None)]),                      # neither observation nor error
    dict(_HEAD, cases=[dict(_CASE, passed=True)]),                   # an extra part in a case
    dict(_HEAD, verdict="passed", cases=[_CASE]),                    # an unknown header field
    dict(_HEAD, cases=[_case(dict(_NODE, requires_grad="no"))]),     # a field of the wrong type
    dict(_HEAD, cases=[_case(dict(_NODE, dtype="qint8", blob=0))]),  # a dtype the wire does not carry
], ids=["no-values", "two-cases", "no-cases", "empty-case", "extra-case-key", "extra-header-key",
        "bad-field-type", "unknown-dtype"])
async def test_a_hand_written_frame_missing_or_adding_parts_is_an_error(
        runner_client: RunnerClient, header: dict) -> None:
    sub = _frame_writer(repr(header))
    r = await grade_then_recover(runner_client, job(sub, setup=ONE_CASE))
    assert r["verdict"] == "error", r
    assert r["passed_cases"] == 0, r
    assert "interfered with the grading harness" in r["message"], r


@pytest.mark.parametrize("table,nodes,extra", [
    ([[0, 48], [0, 48]], [0, 1], b""),          # two blobs over the same bytes
    ([[0, 48]], [0, 0], b""),                   # one blob used by two tensors
    ([[0, 48], [48, 48]], [0], b""),            # a blob no tensor uses
    ([[0, 48]], [0], b"\0" * 16),               # bytes after the last blob
    ([[8, 48]], [0], b"\0" * 8),                # a gap before a blob
], ids=["overlap", "reused", "unused", "trailing", "gap"])
async def test_a_blob_table_that_does_not_add_up_is_an_error(
        runner_client: RunnerClient, table: list, nodes: list, extra: bytes) -> None:
    """Each blob is laid end to end and used once: a frame cannot multiply its size in the parent."""
    obs = {"t": "list", "v": [_tensor_node([4, 3], blob=i) for i in nodes]}
    header = {"status": "ok", "error": None, "tampered": [], "blobs": table,
              "cases": [{"name": "one", "example": False, "obs": obs, "error": None}]}
    size = sum(n for _o, n in table) if table != [[8, 48]] else 48
    sub = _frame_writer(repr(header), f"bytes({size}) + {extra!r}")
    probe = "def probe(result, args, kwargs, call):\n    return [result, result]\n"
    r = await grade_then_recover(runner_client, job(sub, setup=ONE_CASE, probe=probe))
    assert r["verdict"] == "error", r
    assert "interfered" in r["message"], r


async def test_a_forged_frame_against_a_value_probe_fails(runner_client: RunnerClient) -> None:
    """The forger of test_hostile_more's strict-xfail test, facing a probe that returns values:
    without solving, the values it sends are wrong."""
    sub = ("import os\nfrom runner.wire import Encoder\n"
           "def solve(x):\n"
           "    enc = Encoder(1 << 20)\n"
           "    case = {'name': 'one', 'example': False, 'obs': enc.encode({'result': torch.zeros(4, 3)}), 'error': None}\n"
           "    os.write(3, enc.frame({'status': 'ok', 'error': None, 'cases': [case], 'tampered': []}))\n"
           "    os._exit(0)\n")
    r = await grade_then_recover(runner_client, job(sub, setup=ONE_CASE))
    assert r["verdict"] == "failed", r
    assert "values differ" in r["cases"][0]["message"], r


async def test_objects_the_wire_cannot_carry_never_match(runner_client: RunnerClient) -> None:
    """Two objects of the same type used to compare equal by type name alone."""
    setup = ONE_CASE
    reference = "def solve(x):\n    return x.t()\n"
    probe = "def probe(result, args, kwargs, call):\n    return {'result': result, 'obj': object()}\n"
    r = await runner_client.grade(job(reference, setup=setup, probe=probe, reference=reference))
    assert r["verdict"] == "internal", r  # the item is broken (its reference can never be matched)
    assert "reference" in r["message"], r


async def test_an_internal_message_carries_no_reference_code(runner_client: RunnerClient) -> None:
    """A failing reference is the item's fault: the channel hears that, and only the checker and
    the log see its traceback (which could quote the hidden solution)."""
    reference = "def solve(x):\n    secret_helper_name = 1\n    raise ValueError(f'oops {secret_helper_name}')\n"
    r = await runner_client.grade(job(CORRECT, setup=ONE_CASE, reference=reference, seed=77))
    assert r["verdict"] == "internal", r
    assert "secret_helper_name" not in r["message"] and "oops" not in r["message"], r
    assert "oops 1" in (r["error"] or {}).get("message", ""), r


async def test_too_many_progress_marks_are_an_error(runner_client: RunnerClient) -> None:
    sub = ("import os, struct\ndef solve(x):\n"
           "    os.write(3, b''.join(b'QZP1' + struct.pack('<I', i % 2) for i in range(20000)))\n"
           "    return x.t()\n")
    r = await grade_then_recover(runner_client, job(sub, setup=ONE_CASE))
    assert r["verdict"] == "error", r


async def test_lone_surrogates_and_control_characters_come_back_clean(runner_client: RunnerClient) -> None:
    sub = ("import sys\ndef solve(x):\n"
           "    print('out\\x00\\x1b[2J')\n"
           "    raise ValueError('bad \\ud800 \\x00 \\u202e end')\n")
    r = await grade_then_recover(runner_client, job(sub, setup=ONE_CASE))
    assert r["verdict"] == "error", r
    text = json.dumps(r, ensure_ascii=False)
    text.encode("utf-8")  # would raise on a lone surrogate
    assert "\x00" not in text and "\x1b" not in text and "\u202e" not in text
    assert r["error"]["message"].startswith("bad ") and r["error"]["message"].endswith(" end"), r


async def test_innocent_jobs_do_not_pay_for_a_flood_frame(runner_client: RunnerClient) -> None:
    """While the parent deals with frames built to stall it (a header at the size cap, a huge
    case list), correct answers in flight pass: their clocks are their own."""
    flood_cases = _frame_writer("{'status': 'ok', 'error': None, 'tampered': [], 'blobs': [],"
                                " 'cases': [{}] * 2_000_000}")
    flood_nodes = _frame_writer("{'status': 'ok', 'error': None, 'tampered': [], 'blobs': [],"
                                " 'cases': [{'name': 'one', 'example': False, 'error': None,"
                                " 'obs': {'t': 'list', 'v': [{'t': 'int', 'v': '1'}] * 400_000}}]}")
    good = [job(CORRECT, seed=s) for s in (101, 102, 103)]
    bad = [job(flood_cases, setup=ONE_CASE, limits={"wall_s": 10, "cpu_s": 10}),
           job(flood_nodes, setup=ONE_CASE, limits={"wall_s": 10, "cpu_s": 10})]
    results = await asyncio.gather(*(runner_client.grade(j) for j in bad + good))
    for r in results[:2]:
        assert r["verdict"] in ("error", "output_limit"), r
    for r in results[2:]:
        assert r["verdict"] == "passed", r
    assert (await runner_client.grade(job(CORRECT)))["verdict"] == "passed"
