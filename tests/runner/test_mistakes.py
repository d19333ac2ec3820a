"""Naming the mistake: a failing submission that behaves like one of the item's known wrong
answers on every case is told which (`mistake`), through the real sandboxed runner. It is
feedback only: the verdict and the score are the same with or without it."""
from __future__ import annotations

import pytest

from runner.client import RunnerClient
from runner.protocol import Job, JobError, ProtocolError, Result
from tests.runner.jobs import CORRECT, job
from tests.runner.jobs import metric as _metric


IDENTITY = "def solve(x):\n    return x\n"               # forgot to transpose
DOUBLED = "def solve(x):\n    return x.t() * 2\n"       # scaled by mistake
RAISES = "def solve(x):\n    raise ValueError('rows and columns are the same thing')\n"
MISTAKES = [IDENTITY, DOUBLED, RAISES]




async def test_a_failing_answer_written_another_way_is_told_its_mistake(runner_client: RunnerClient) -> None:
    seed = 101  # a seed of its own: the known answers' runs are counted from cold
    before = await _metric(runner_client, "runner_mistake_runs_total")
    r = await runner_client.grade(job("def solve(x):\n    y = x.transpose(0, 1)\n    return y + y\n",
                                      mistakes=MISTAKES, seed=seed))
    assert r["verdict"] == "failed" and r["mistake"] == 1, r
    assert r["passed_cases"] == 0
    # another player, the same mistake in a third idiom: no known answer runs again
    r = await runner_client.grade(job("def solve(x):\n    return torch.mul(x.T, 2.0)\n", mistakes=MISTAKES, seed=seed))
    assert r["mistake"] == 1, r
    # the known answers ran once, in order, up to the first alike: RAISES has not run yet
    assert await _metric(runner_client, "runner_mistake_runs_total") == before + 2
    # an answer that is the known mistake itself, and one like the first mistake
    r = await runner_client.grade(job("def solve(x):\n    return x.clone()\n", mistakes=MISTAKES, seed=seed))
    assert r["mistake"] == 0, r


async def test_the_same_error_is_the_same_mistake_but_another_error_is_not(runner_client: RunnerClient) -> None:
    same = "def solve(x):\n    if x.numel():\n        raise ValueError('rows and columns are the same thing')\n"
    r = await runner_client.grade(job(same, mistakes=MISTAKES))
    assert r["verdict"] == "error" and r["mistake"] == 2, r
    other = "def solve(x):\n    raise ValueError('something else')\n"
    r = await runner_client.grade(job(other, mistakes=MISTAKES))
    assert r["verdict"] == "error" and "mistake" not in r, r


async def test_no_mistake_for_a_pass_for_an_unknown_failure_or_a_partial_likeness(runner_client: RunnerClient) -> None:
    r = await runner_client.grade(job(CORRECT, mistakes=MISTAKES))
    assert r["verdict"] == "passed" and "mistake" not in r, r
    r = await runner_client.grade(job("def solve(x):\n    return x.t() + 1\n", mistakes=MISTAKES))
    assert r["verdict"] == "failed" and "mistake" not in r, r
    # like IDENTITY on the square case only (the 6x6 one): every case must agree
    square_only = "def solve(x):\n    return x if x.shape[0] == x.shape[1] else x.t() * 3\n"
    r = await runner_client.grade(job(square_only, mistakes=MISTAKES))
    assert r["verdict"] == "failed" and "mistake" not in r, r


async def test_a_known_answer_that_hangs_is_never_matched_and_others_still_are(runner_client: RunnerClient) -> None:
    hangs = "def solve(x):\n    while True:\n        pass\n"
    r = await runner_client.grade(job(IDENTITY, mistakes=[hangs, IDENTITY], limits={"wall_s": 2, "cpu_s": 2}))
    assert r["verdict"] == "failed" and r["mistake"] == 1, r
    # a submission that hangs itself is a timeout, never "like" the hanging known answer
    r = await runner_client.grade(job(hangs, mistakes=[hangs], limits={"wall_s": 2, "cpu_s": 2}))
    assert r["verdict"] == "timeout" and "mistake" not in r, r
    assert (await runner_client.grade(job(CORRECT)))["verdict"] == "passed"


async def test_tampering_is_never_dressed_up_as_a_known_mistake(runner_client: RunnerClient) -> None:
    """A submission that tampers with what grading relies on fails, with no hint, even when
    its observations are a known mistake's."""
    patched = ("import torch\ntorch.allclose = lambda *a, **k: True\n"
               "def solve(x):\n    return x.t() * 2\n")
    r = await runner_client.grade(job(patched, mistakes=MISTAKES))
    assert r["verdict"] == "failed" and "modified torch" in r["message"] and "mistake" not in r, r
    assert (await runner_client.grade(job(CORRECT, mistakes=MISTAKES)))["verdict"] == "passed"


def test_the_job_and_the_result_carry_mistakes_strictly() -> None:
    j = Job.from_json(job(IDENTITY, mistakes=MISTAKES))
    assert j.mistakes == tuple(MISTAKES) and j.to_json()["mistakes"] == MISTAKES
    assert "mistakes" not in Job.from_json(job(IDENTITY)).to_json()
    for bad in ("x", [1], [""], ["x"] * 9):
        with pytest.raises(JobError, match="mistakes must be a list"):
            Job.from_json(job(IDENTITY, mistakes=bad))
    with pytest.raises(JobError, match="code jobs only"):
        Job.from_json({"kind": "output", "snippet": "print(1)", "mistakes": [IDENTITY]})
    failed = {"verdict": "failed", "passed_cases": 0, "total_cases": 1, "cases": []}
    assert Result.from_json(dict(failed, mistake=2)).mistake == 2
    for bad_mistake in (-1, "1", 1.0, True, 8):
        with pytest.raises(ProtocolError, match="mistake"):
            Result.from_json(dict(failed, mistake=bad_mistake))
    with pytest.raises(ProtocolError, match="mistake"):
        Result.from_json({"verdict": "passed", "passed_cases": 1, "total_cases": 1, "cases": [], "mistake": 0})


async def test_a_probe_error_never_quotes_the_hidden_values(runner_client: RunnerClient) -> None:
    """A probe that raises on the player's result (here a KeyError keyed by a hidden tensor)
    says what was raised, without the tensor it would print."""
    probe = ("def probe(result, args, kwargs, call):\n"
             "    table = {}\n"
             "    if result.shape != args[0].t().shape:\n"
             "        return table[args[0]]\n"
             "    return {'result': result}\n")
    r = await runner_client.grade(job("def solve(x):\n    return x.clone()\n", probe=probe))
    assert r["verdict"] == "error", r
    shown = r["message"] + " ".join(c["message"] for c in r["cases"])
    assert "checking your result raised KeyError" in shown and "tensor(" not in shown, shown
    assert "quotes the hidden case's values" in shown
    assert (await runner_client.grade(job(CORRECT, probe=probe)))["verdict"] == "passed"
