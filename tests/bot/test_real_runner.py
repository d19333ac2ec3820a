"""End to end through the real, sandboxed runner (the session's `runner_client` fixture)."""
from __future__ import annotations

from questionbank.model import Item

from bot.core import RunnerPool

from .conftest import ALICE, BOB, MOD, make_harness
from .helpers import T, output_item

TRANSPOSE = Item(
    id="e2e-transpose", kind="code", outline=("2.1.1.1",), difficulty=2, tags=("view",), requires="cpu",
    title=T("Transpose"), prompt=T("Return the transpose of a 2-D tensor."), explanation=T("x.t() is a view."),
    entrypoint="solve", starter="def solve(x):\n    ...\n",
    setup=("def make_cases():\n"
           "    return [{'args': (torch.randn(2, 3),), 'name': 'small', 'example': True},\n"
           "            {'args': (torch.randn(4, 5),), 'name': 'wide', 'example': False}]\n"),
    reference="def solve(x):\n    return x.t()\n",
)


async def test_real_code_item_graded_by_the_runner(runner_client, tmp_path):
    from .helpers import MiniBank

    h = await make_harness(tmp_path, bank=MiniBank.of(TRANSPOSE, output_item("o1")))
    h.svc.pool = RunnerPool.single(runner_client)
    h.svc.grader.pool = h.svc.pool
    try:
        await h.svc.pool.refresh()
        await h.cmd(MOD, "enable")
        await h.cmd(MOD, "post e2e-transpose")
        await h.answer(ALICE, "```python\ndef solve(x):\n    return x.transpose(0, 1)\n```")
        await h.answer(BOB, "```python\ndef solve(x):\n    return x\n```")
        await h.svc.settle()
        results = {m.data["player"]: m for m in h.kinds("result")}
        assert results["Alice"].data["verdict"] == "passed"
        assert results["Bob"].data["verdict"] in ("failed", "error")
        assert await h.board() == [(1, "Alice", 25), (2, "Bob", 0)]
        # an output item: the expected text comes from running the snippet on real torch
        await h.cmd(MOD, "post o1")
        await h.answer(ALICE, "torch.Size([2, 3])")
        await h.svc.settle()
        assert h.kinds("result")[-1].data["verdict"] == "passed"
    finally:
        await h.svc.close()
