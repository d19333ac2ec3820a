"""Output answers are compared the way players read printed tensors: one rule
(`questionbank.jobs.normalise_output`) for the bank, `questionbank try` and the bot, tested on
the real expected output of every output item of the bank (computed by the sandboxed runner)."""
from __future__ import annotations

import asyncio
import re

import pytest

from questionbank.jobs import normalise_output, output_job, outputs_match
from questionbank.loader import load_bank

OUTPUT_ITEMS = sorted(i.id for i in load_bank() if i.kind == "output")


@pytest.fixture(scope="session")
def expected_outputs(runner_client) -> dict[str, str]:  # noqa: ANN001
    """Every output item's snippet run once on the real runner, as `questionbank check` does."""
    bank = load_bank()

    async def run_all() -> dict[str, str]:
        out: dict[str, str] = {}
        for item_id in OUTPUT_ITEMS:
            result = await runner_client.grade(output_job(bank.get(item_id), job_id=f"normalise:{item_id}"))
            assert result.get("verdict") == "passed", (item_id, result)
            out[item_id] = str(result.get("stdout") or "")
        return out

    return asyncio.run(run_all())


def player_variants(expected: str) -> dict[str, str]:
    """What a player types for the same output."""
    one_line = " ".join(expected.strip().splitlines())
    unpadded = re.sub(r"([\[(]) +", r"\1", expected)
    unpadded = re.sub(r" +([\])])", r"\1", unpadded)
    unpadded = re.sub(r" {2,}", " ", unpadded)
    no_comma_space = re.sub(r", +", ",", unpadded)
    return {
        "as printed": expected,
        "trailing newline dropped, blank lines added": "\n" + expected.rstrip("\n") + "\n\n",
        "pasted on one line": one_line,
        "padding removed": unpadded,
        "padding removed, on one line": " ".join(unpadded.split("\n")),
        "no blank after commas": no_comma_space,
        "extra blanks": expected.replace(" ", "   ").replace("\n", "  \n  "),
    }


def mutations(expected: str) -> list[str]:
    """Outputs that really differ: another digit, another dtype spelling, a missing token."""
    out = []
    m = re.search(r"\d", expected)
    if m:
        d = m.group()
        out.append(expected[:m.start()] + ("7" if d != "7" else "3") + expected[m.end():])
    words = expected.split()
    if len(words) > 1:
        out.append(" ".join(words[:-1]))
    if "True" in expected:
        out.append(expected.replace("True", "False", 1))
    m = re.search(r"(\d)\.(?=[,\])\s])", expected)  # "1." -> "1": a float printed as an int
    if m:
        out.append(expected[:m.start()] + m.group(1) + expected[m.end():])
    return out


def test_the_bank_has_output_items() -> None:
    assert len(OUTPUT_ITEMS) >= 10


@pytest.mark.parametrize("item_id", OUTPUT_ITEMS)
def test_every_output_item_accepts_what_players_type(item_id: str, expected_outputs: dict[str, str]) -> None:
    expected = expected_outputs[item_id]
    assert expected.strip(), f"{item_id} prints nothing"
    for label, given in player_variants(expected).items():
        assert outputs_match(given, expected), f"{item_id}: {label} should match:\n{given!r}\nvs\n{expected!r}"
    for wrong in mutations(expected):
        assert not outputs_match(wrong, expected), f"{item_id}: {wrong!r} should not match {expected!r}"


def test_torch_padding_and_wrapping() -> None:
    assert outputs_match("tensor([0, 4, 8, 1])", "tensor([ 0,  4,  8,  1])\n")
    assert outputs_match("tensor([-1,  0,  2])", "tensor([-1, 0, 2])")
    assert outputs_match("tensor([[1, 2], [3, 4]])", "tensor([[1, 2],\n        [3, 4]])\n")
    assert outputs_match("tensor([[1,2],[3,4]]) torch.Size([2, 2])",
                         "tensor([[1, 2],\n        [3, 4]])\ntorch.Size([2, 2])\n")
    assert outputs_match("( 3, 1 ) True", "(3, 1)\nTrue")
    assert normalise_output("tensor([ 0,  4,  8])") == normalise_output("tensor([0, 4, 8])") == "tensor([0, 4, 8])"


def test_genuinely_different_outputs_still_differ() -> None:
    assert not outputs_match("tensor([1., 2.])", "tensor([1, 2])")
    assert not outputs_match("tensor([1, 2])", "tensor([12])")
    assert not outputs_match("torch.Size([2, 3])", "torch.Size([3, 2])")
    assert not outputs_match("tensor([1, 2], dtype=torch.int32)", "tensor([1, 2])")
    assert not outputs_match("True False", "False True")
    assert not outputs_match("12", "1 2")
