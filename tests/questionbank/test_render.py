"""What a player reads after an answer is graded."""
from __future__ import annotations

from questionbank.render import render_result


def _case(i: int, passed: bool, ran: bool = True, message: str = "") -> dict:
    return {"index": i, "name": f"case {i + 1}", "example": i == 0, "passed": passed, "ran": ran, "message": message}


def test_failed_answer_lists_each_case_with_its_message() -> None:
    text = render_result({"verdict": "failed", "message": "1 of 2 cases passed", "passed_cases": 1, "total_cases": 2,
                          "cases": [_case(0, True), _case(1, False, message="result: wrong shape (got (3,))")]})
    assert "1/2" in text
    assert "✓ case 1 (example)" in text
    assert "✗ case 2 (hidden)" in text and "wrong shape (got (3,))" in text


def test_a_verdict_before_any_case_ran_does_not_list_cases() -> None:
    text = render_result({"verdict": "invalid", "message": "define a function named `solve`", "passed_cases": 0,
                          "total_cases": 3, "cases": [_case(i, False, ran=False, message="not run") for i in range(3)],
                          "error": {"type": "MissingEntrypoint", "message": "define a function named `solve`"}})
    assert "not run" not in text
    assert "define a function named `solve`" in text


def test_a_missing_package_says_what_the_grader_has() -> None:
    error = {"type": "ModuleNotFoundError", "message": "No module named 'scipy'"}
    text = render_result({"verdict": "error", "passed_cases": 0, "total_cases": 2, "error": error,
                          "cases": [_case(0, False, message="ModuleNotFoundError")]})
    assert "No module named 'scipy'" in text and "no other package is installed" in text
    assert "没有安装其他包" in render_result({"verdict": "error", "error": error}, "zh")
    other = render_result({"verdict": "error", "error": {"type": "TypeError", "message": "bad operand"}})
    assert "package" not in other
