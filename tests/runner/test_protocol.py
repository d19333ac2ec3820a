"""The grading protocol through the real HTTP service and sandbox: what a player's answer earns."""
from __future__ import annotations

import aiohttp
import pytest

from runner.client import RunnerClient
from tests.runner.jobs import CORRECT, job

pytestmark = pytest.mark.asyncio


async def test_correct_answer_passes_every_case(runner_client: RunnerClient) -> None:
    r = await runner_client.grade(job(CORRECT))
    assert r["verdict"] == "passed"
    assert (r["passed_cases"], r["total_cases"], r["score"]) == (4, 4, 1.0)
    assert r["cases"][0] == {"index": 0, "name": "small", "example": True, "passed": True, "ran": True,
                             "message": "", "evidence": "values"}


async def test_wrong_answer_fails_with_a_message_that_hides_expected_values(runner_client: RunnerClient) -> None:
    r = await runner_client.grade(job("def solve(x):\n    return x * 2\n"))
    assert r["verdict"] == "failed"
    assert r["passed_cases"] == 0
    assert "wrong shape (got (3, 4))" in r["cases"][0]["message"]
    # square input: same shape, so the values are what differ
    assert "values differ" in r["cases"][3]["message"]


async def test_partially_correct_answer_scores_the_cases_it_gets_right(runner_client: RunnerClient) -> None:
    sub = "def solve(x):\n    return x.t() if x.shape[0] != 6 else x\n"
    r = await runner_client.grade(job(sub))
    assert r["verdict"] == "failed"
    assert (r["passed_cases"], r["total_cases"]) == (3, 4)
    assert r["score"] == 0.75
    assert [c["passed"] for c in r["cases"]] == [True, True, True, False]


async def test_a_timeout_names_the_case_that_was_running(runner_client: RunnerClient) -> None:
    # fast on the small cases, hopelessly slow on the big square one: the player learns which
    sub = "import time\n\ndef solve(x):\n    if x.shape == (6, 6):\n        time.sleep(60)\n    return x.t()\n"
    r = await runner_client.grade(job(sub, limits={"wall_s": 2, "cpu_s": 2}))
    assert r["verdict"] == "timeout"
    assert r["message"] == ("time limit exceeded: all cases together ran past 2 s; "
                            "it was running case 4 of 4 (case 4)")
    assert r["passed_cases"] == 0


async def test_exception_reports_type_and_only_the_players_traceback(runner_client: RunnerClient) -> None:
    sub = "def helper(x):\n    return x.bogus()\n\ndef solve(x):\n    return helper(x)\n"
    r = await runner_client.grade(job(sub))
    assert r["verdict"] == "error"
    assert r["error"]["type"] == "AttributeError"
    tb = r["error"]["traceback"]
    assert "line 2, in helper" in tb and "line 5, in solve" in tb
    assert "harness" not in tb and "runner" not in tb
    assert r["cases"][0]["message"].startswith("raised AttributeError")


async def test_syntax_error_and_missing_entrypoint_are_invalid(runner_client: RunnerClient) -> None:
    r = await runner_client.grade(job("def solve(x)\n    return x.t()\n"))
    assert r["verdict"] == "invalid"
    assert "syntax error" in r["message"] and "line 1" in r["message"]
    r = await runner_client.grade(job("def answer(x):\n    return x.t()\n"))
    assert r["verdict"] == "invalid"
    assert not any(c["ran"] for c in r["cases"]) and r["passed_cases"] == 0
    assert "define a function named `solve`" in r["message"]
    r = await runner_client.grade(job("solve = 3\n"))
    assert r["verdict"] == "invalid"


async def test_tolerances_are_respected_at_their_edges(runner_client: RunnerClient) -> None:
    near = "def solve(x):\n    return x.t() + 1e-4\n"
    assert (await runner_client.grade(job(near, tolerances={"rtol": 0, "atol": 2e-4})))["verdict"] == "passed"
    r = await runner_client.grade(job(near, tolerances={"rtol": 0, "atol": 5e-5}))
    assert r["verdict"] == "failed"
    assert "atol=5e-05" in r["cases"][0]["message"]


async def test_nan_must_be_in_the_same_places(runner_client: RunnerClient) -> None:
    setup = "def make_cases():\n    return [{'args': (torch.tensor([1.0, -1.0, 4.0]),)}]\n"
    ref = "def solve(x):\n    return torch.sqrt(x)\n"
    assert (await runner_client.grade(job("def solve(x):\n    return x.sqrt()\n", setup=setup, reference=ref)))["verdict"] == "passed"
    r = await runner_client.grade(job("def solve(x):\n    return x.abs().sqrt()\n", setup=setup, reference=ref))
    assert r["verdict"] == "failed" and "NaN" in r["cases"][0]["message"]


async def test_dtype_and_shape_mismatches_are_named(runner_client: RunnerClient) -> None:
    r = await runner_client.grade(job("def solve(x):\n    return x.t().double()\n"))
    assert r["verdict"] == "failed" and "wrong dtype (got float64)" in r["cases"][0]["message"]
    r = await runner_client.grade(job("def solve(x):\n    return x.t().unsqueeze(0)\n"))
    assert "wrong shape" in r["cases"][0]["message"]
    r = await runner_client.grade(job("def solve(x):\n    return x.t().tolist()\n"))
    assert "expected a tensor, got a list" in r["cases"][0]["message"]


async def test_probe_tells_a_view_from_a_copy(runner_client: RunnerClient) -> None:
    probe = ("def probe(result, args, kwargs, call):\n"
             "    return {'result': result,\n"
             "            'shares_storage': result.untyped_storage().data_ptr() == args[0].untyped_storage().data_ptr()}\n")
    copy = "def solve(x):\n    return x.t().contiguous()\n"
    r = await runner_client.grade(job(copy, probe=probe))
    assert r["verdict"] == "failed"
    assert r["cases"][0]["message"] == "shares_storage: wrong boolean value"
    assert (await runner_client.grade(job(CORRECT, probe=probe)))["verdict"] == "passed"


async def test_probe_observes_gradients_and_in_place_changes(runner_client: RunnerClient) -> None:
    setup = "def make_cases():\n    return [{'args': (torch.randn(4, requires_grad=True),)} for _ in range(3)]\n"
    ref = "def solve(x):\n    return (x ** 2).sum()\n"
    probe = "def probe(result, args, kwargs, call):\n    result.backward()\n    return {'value': result.detach(), 'grad': args[0].grad}\n"
    wrong_grad = "def solve(x):\n    return (x.detach() ** 2).sum() + 0 * x.sum()\n"
    r = await runner_client.grade(job(wrong_grad, setup=setup, reference=ref, probe=probe))
    assert r["verdict"] == "failed"
    assert "grad" in r["cases"][0]["message"]
    r = await runner_client.grade(job("def solve(x):\n    return x.pow(2).sum()\n", setup=setup, reference=ref, probe=probe))
    assert r["verdict"] == "passed"


async def test_stdout_comes_back_cut_with_a_note(runner_client: RunnerClient) -> None:
    r = await runner_client.grade(job("def solve(x):\n    print('x' * 3000)\n    return x.t()\n"))
    assert r["verdict"] == "passed"
    assert r["output_truncated"] is True
    assert "[output cut:" in r["stdout"]
    assert len(r["stdout"]) < 5000


async def test_output_job_returns_the_snippets_stdout(runner_client: RunnerClient) -> None:
    r = await runner_client.grade({"kind": "output", "snippet": "x = torch.arange(6).view(2, 3)\nprint(x.t().stride(), x.t().is_contiguous())\n"})
    assert r["verdict"] == "passed"
    assert r["stdout"] == "(1, 3) False\n"
    r = await runner_client.grade({"kind": "output", "snippet": "print(1/0)"})
    assert r["verdict"] == "error" and r["error"]["type"] == "ZeroDivisionError"


async def test_broken_reference_is_internal_never_the_players_fault(runner_client: RunnerClient) -> None:
    r = await runner_client.grade(job(CORRECT, reference="def solve(x):\n    raise ValueError('oops')\n"))
    assert r["verdict"] == "internal"
    assert "reference" in r["message"]


async def test_malformed_jobs_get_400_and_a_wrong_token_401(runner_client: RunnerClient) -> None:
    async with aiohttp.ClientSession() as s:
        headers = {"Authorization": f"Bearer {runner_client.token}"}
        async with s.post(runner_client.url + "/v1/grade", json={"kind": "code"}, headers=headers) as resp:
            assert resp.status == 400
            assert "setup must be a string" in (await resp.json())["error"]
        async with s.post(runner_client.url + "/v1/grade", data=b"{not json", headers=headers) as resp:
            assert resp.status == 400
        async with s.post(runner_client.url + "/v1/grade", json=job(CORRECT), headers={"Authorization": "Bearer nope"}) as resp:
            assert resp.status == 401
        async with s.post(runner_client.url + "/v1/grade", data=b"x" * (600 * 1024), headers=headers) as resp:
            assert resp.status == 413
        async with s.get(runner_client.url + "/metrics") as resp:
            text = await resp.text()
            assert "runner_jobs_total" in text and 'runner_verdicts_total{verdict="passed"}' in text


async def test_health_reports_capabilities(runner_client: RunnerClient) -> None:
    h = await runner_client.health()
    assert h["status"] == "ok"
    assert h["torch"].startswith("2.")
    assert h["sandboxed"] is True
    for feature in ("bwrap", "pidns-per-job", "netns-per-job", "seccomp", "rlimits"):
        assert feature in h["sandbox"]
    assert h["free_workers"] <= h["workers"]


async def test_cuda_jobs_on_a_cpu_runner_are_unsupported(runner_client: RunnerClient) -> None:
    """Not `internal` with a message to sniff: the bot routes on the verdict itself."""
    h = await runner_client.health()
    if h["cuda"]:
        pytest.skip("this runner has a GPU")
    r = await runner_client.grade(job(CORRECT, requires="cuda"))
    assert r["verdict"] == "unsupported" and "no CUDA" in r["message"]


@pytest.mark.cuda
async def test_cuda_job_runs_on_the_gpu(runner_client: RunnerClient) -> None:
    h = await runner_client.health()
    if not h["cuda"]:
        pytest.skip("no CUDA device on this runner")
    setup = "def make_cases():\n    return [{'args': (torch.randn(64, 64, device='cuda'),)}]\n"
    r = await runner_client.grade(job("def solve(x):\n    return x.t()\n", setup=setup, requires="cuda"))
    assert r["verdict"] == "passed", r


async def test_importing_torch_submodules_is_not_mistaken_for_tampering(runner_client: RunnerClient) -> None:
    # torch._dynamo rewraps torch.manual_seed when imported; that is not the player's doing
    sub = ("import torch.func\nimport torch.fx\n\ndef solve(x):\n    import torch._dynamo\n"
           "    return torch.func.vmap(lambda r: r)(x).t()\n")
    r = await runner_client.grade(job(sub))
    assert r["verdict"] == "passed", r
