"""The verdict ladder and the protocol, without a sandbox: hand-made runs and frames in, results out."""
from __future__ import annotations

import signal

import pytest
import torch

from runner.compare import compare
from runner.judge import INTERFERED, decode_frame, evidence, judge_output, judge_submission
from runner.protocol import Job, JobError, ProtocolError, Result, Verdict, clean_text
from runner.supervisor import RawRun
from runner.wire import Encoder, OpaqueObject


def _frame(cases: list, *, status: str = "ok", tampered: list | None = None, error: dict | None = None) -> bytes:
    enc = Encoder(1 << 20)
    rows = [{"name": f"c{i}", "example": i == 0, "obs": enc.encode(obs) if obs is not None else None,
             "error": err} for i, (obs, err) in enumerate(cases)]
    return enc.frame({"status": status, "error": error, "cases": rows, "tampered": tampered or []})


def _ran(frame: bytes | None, **over: object) -> RawRun:
    raw = RawRun(frame=frame, status=0, wall_limit=5, cpu_limit=5)
    for k, v in over.items():
        setattr(raw, k, v)
    return raw


X = torch.arange(12.0).reshape(3, 4)
REF = decode_frame(_frame([({"result": X}, None), ({"result": X * 2}, None)]))
assert REF is not None


def _judge(frame: bytes | None, **over: object) -> Result:
    return judge_submission(REF, _ran(frame, **over), rtol=1e-5, atol=1e-8)


def test_matching_observations_pass_and_wrong_values_fail() -> None:
    assert _judge(_frame([({"result": X}, None), ({"result": X * 2}, None)])).verdict is Verdict.PASSED
    r = _judge(_frame([({"result": X}, None), ({"result": X * 3}, None)]))
    assert (r.verdict, r.passed_cases, r.total_cases) == (Verdict.FAILED, 1, 2)
    assert "values differ" in r.cases[1].message


def test_a_frame_with_another_case_count_is_the_players_error() -> None:
    r = _judge(_frame([({"result": X}, None)]))
    assert (r.verdict, r.message, r.passed_cases) == (Verdict.ERROR, INTERFERED, 0)


def test_tampering_fails_every_case_even_when_the_values_match() -> None:
    r = _judge(_frame([({"result": X}, None), ({"result": X * 2}, None)], tampered=["runner.wire.Encoder.encode"]))
    assert r.verdict is Verdict.FAILED and r.passed_cases == 0
    assert "runner.wire.Encoder.encode" in r.message


@pytest.mark.parametrize("over,verdict", [
    ({"fatal": "the sandbox's worker died"}, Verdict.INTERNAL),
    ({"timed_out": True}, Verdict.TIMEOUT),
    ({"cpu_exceeded": True}, Verdict.TIMEOUT),
    ({"memory_exceeded": True}, Verdict.MEMORY),
    ({"output_exceeded": True}, Verdict.OUTPUT_LIMIT),
    ({"result_exceeded": True}, Verdict.OUTPUT_LIMIT),
    ({"status": signal.SIGSEGV}, Verdict.ERROR),
])
def test_outside_verdicts_come_first_and_run_no_case(over: dict, verdict: Verdict) -> None:
    r = _judge(None, **over)
    assert r.verdict is verdict
    assert r.passed_cases == 0 and all(not c.ran for c in r.cases) and len(r.cases) == 2


def test_a_cut_frame_after_a_limit_is_the_limit_not_interference() -> None:
    whole = _frame([({"result": X}, None), ({"result": X * 2}, None)])
    assert _judge(whole[: len(whole) // 2], timed_out=True).verdict is Verdict.TIMEOUT
    assert _judge(whole[: len(whole) // 2]).message == INTERFERED


def test_a_case_that_raised_is_an_error_with_partial_credit() -> None:
    err = {"type": "ValueError", "message": "bad\ud800", "traceback": "  line 2"}
    r = _judge(_frame([({"result": X}, None), (None, err)]))
    assert (r.verdict, r.passed_cases) == (Verdict.ERROR, 1)
    assert r.error is not None and r.error.message == "bad\ufffd"


def test_opaque_objects_never_compare_equal() -> None:
    assert compare(OpaqueObject("a.B"), OpaqueObject("a.B"), rtol=0, atol=0)
    ref = decode_frame(_frame([({"obj": object()}, None)]))
    assert ref is not None
    r = judge_submission(ref, _ran(_frame([({"obj": object()}, None)])), rtol=0, atol=0)
    assert r.verdict is Verdict.FAILED


def test_meta_tensors_match_only_meta_tensors() -> None:
    ref = decode_frame(_frame([({"result": torch.empty(2, 3, device="meta")}, None)]))
    assert ref is not None
    ok = judge_submission(ref, _ran(_frame([({"result": torch.empty(2, 3, device="meta")}, None)])), rtol=0, atol=0)
    assert ok.verdict is Verdict.PASSED
    real = judge_submission(ref, _ran(_frame([({"result": torch.empty(2, 3)}, None)])), rtol=0, atol=0)
    assert real.verdict is Verdict.FAILED


def _decoded(value: object) -> object:
    judged = decode_frame(_frame([(value, None)]))
    assert judged is not None
    return judged.cases[0]["obs"]


def test_evidence_tells_values_from_flags() -> None:
    assert evidence(_decoded({"result": X, "shares": True})) == "values"
    assert evidence(_decoded({"ok": True, "count": 3, "name": "x"})) == "flags"
    assert evidence(_decoded({"loss": 0.5})) == "values"
    assert evidence(_decoded({"empty": torch.empty(0)})) == "flags"


def test_an_output_job_keeps_its_stdout_and_cleans_it() -> None:
    r = judge_output(RawRun(frame=Encoder(1).frame({"status": "ok", "error": None, "cases": [], "tampered": []}),
                            status=0, stdout=b"tensor([1, 2])\n\x1b[2J\n"))
    assert r.verdict is Verdict.PASSED
    assert r.stdout == "tensor([1, 2])\n\ufffd[2J\n"


def test_clean_text_removes_what_breaks_printing_and_storage() -> None:
    assert clean_text("a\ud800b\x00c\u202ed\n\te", 100) == "a\ufffdb\ufffdc\ufffdd\n\te"
    assert clean_text("x" * 50, 10) == "x" * 10
    clean_text("\ud800" * 10, 100).encode("utf-8")


def test_result_parsing_fails_closed() -> None:
    good = Result(Verdict.PASSED, "all 1 cases passed", 1, 1).to_json()
    assert Result.from_json(good).verdict is Verdict.PASSED
    for bad in ({**good, "verdict": "pass"}, {**good, "passed_cases": 2},
                {**good, "cases": [{"index": 0, "passed": False}]}, {**good, "passed_cases": "1"}, []):
        with pytest.raises(ProtocolError):
            Result.from_json(bad)


def test_jobs_are_validated_and_round_trip() -> None:
    job = Job(setup="def make_cases(): ...", reference="def f(): ...", submission="x", entrypoint="f",
              probe="", seed=3, tolerances={"rtol": 1e-3}, limits={"wall_s": 2})
    assert Job.from_json(job.to_json()) == job
    for bad in ({"kind": "code"}, {**job.to_json(), "entrypoint": "not valid"}, {**job.to_json(), "seed": -1},
                {**job.to_json(), "tolerances": {"rtol": "big"}}, {**job.to_json(), "requires": "tpu"}):
        with pytest.raises(JobError):
            Job.from_json(bad)


def test_runner_faults_are_never_the_players() -> None:
    assert {v for v in Verdict if v.runner_fault} == {Verdict.INTERNAL, Verdict.UNSUPPORTED}


def test_more_progress_marks_than_cases_is_interference() -> None:
    whole = _frame([({"result": X}, None), ({"result": X * 2}, None)])
    assert _judge(whole, marks=3).verdict is Verdict.PASSED  # one per case, plus one
    assert _judge(whole, marks=4).message == INTERFERED
