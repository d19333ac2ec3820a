"""A flag forger must fail: the probes rewritten so that values, not flags, decide a case.

A probe runs in the player's process, after the player's code, so a determined player can make it
report whatever it likes (runner/README.md, "Probes run in the player's process"). Flags are easy
to forge: "shares storage" is True, "hooks left" is 0, "grad is None" holds, whatever the code did.
So each item below carries evidence only a solver has: the result after the input's memory was
overwritten (a view shows the new values), the gradients themselves, the state after one more step.

Here, without the sandbox: run the reference and a known wrong answer in-process with the runner's
own harness, decode the frames, and forge the wrong answer's observations the way a player who
knows the right flags would (every bool/int/None/str/dtype leaf replaced by the reference's). The
comparison must still fail. The reference and other correct solutions must still compare equal,
so the test is honest.
"""
from __future__ import annotations

import dataclasses
import functools
import textwrap
from dataclasses import dataclass
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from questionbank.loader import load_bank  # noqa: E402
from questionbank.model import Item  # noqa: E402
from runner.compare import compare  # noqa: E402
from runner.harness import run_code_job  # noqa: E402
from runner.wire import Decoder, OpaqueObject, TensorMeta, split_frame  # noqa: E402


@dataclass(frozen=True)
class Target:
    """An item whose probe was rewritten: the wrong answers (1-based, as `check` numbers them)
    whose failure a flag forger could erase before, and other correct solutions."""

    wrong: tuple[int, ...]
    alternatives: tuple[str, ...] = ()


def src(text: str) -> str:
    return textwrap.dedent(text).strip("\n") + "\n"


TARGETS: dict[str, Target] = {
    "numpy-zero-copy-when-possible": Target((1, 3), (src("""
        import numpy as np

        def to_float_tensor(arr):
            if arr.dtype == np.float32 and min(arr.strides, default=0) >= 0:
                return torch.from_numpy(arr)
            return torch.tensor(np.ascontiguousarray(arr), dtype=torch.float32)
        """),)),
    "dilated-frames-as-strided": Target((2,), (src("""
        def frames(x, size, step, dilation):
            span = (size - 1) * dilation + 1
            if x.shape[-1] < span:
                return x[..., :0].unsqueeze(-1).expand(*x.shape[:-1], 0, size)
            return x.unfold(-1, span, step)[..., ::dilation]
        """),)),
    "nchw-to-nhwc-view": Target((3,), (src("""
        def nchw_to_nhwc(x):
            return x.movedim(1, -1)
        """),)),
    "crop-border-ellipsis": Target((3,), (src("""
        def crop_border(x, m):
            H, W = x.shape[-2:]
            return x.narrow(-2, m, H - 2 * m).narrow(-1, m, W - 2 * m)
        """),)),
    "compact-pinned-storage": Target((1, 2, 3), (src("""
        def compact(t):
            if t.untyped_storage().nbytes() <= t.numel() * t.element_size():
                return t
            out = torch.empty(t.shape, dtype=t.dtype)
            out.copy_(t)
            return out
        """),)),
    "axpy-into-workspace": Target((5,), (src("""
        def axpy_into(buf, x, y, alpha):
            out = buf[: x.shape[0]]
            out.copy_(y)
            out.add_(x, alpha=alpha)
            return out
        """),)),
    "snapshot-state-deep-copy": Target((3,), (src("""
        def snapshot(state):
            return {k: v.clone().detach() for k, v in state.items()}
        """),)),
    "ema-weights-in-place": Target((1, 2), (src("""
        def ema_update_(ema_model, model, decay):
            with torch.no_grad():
                for e, p in zip(ema_model.parameters(), model.parameters()):
                    e.lerp_(p, 1 - decay)
                for e, b in zip(ema_model.buffers(), model.buffers()):
                    e.copy_(b)
        """),)),
    "jacobian-rows-one-forward": Target((3,), (src("""
        def jacobian_rows(f, x):
            return torch.autograd.functional.jacobian(f, x.detach())
        """), src("""
        def jacobian_rows(f, x):
            return torch.func.jacrev(f)(x.detach())
        """))),
    "task-gradients-one-graph": Target((5,), (src("""
        def task_gradients(model, x, y_reg, y_cls):
            params = list(model.parameters())
            live = [p for p in params if p.requires_grad]
            pred, logits = model(x)
            out = []
            for loss in (F.mse_loss(pred, y_reg), F.cross_entropy(logits, y_cls)):
                got = torch.autograd.grad(loss, live, retain_graph=True, allow_unused=True)
                by_id = {id(p): g for p, g in zip(live, got)}
                out.append([None if not p.requires_grad
                            else by_id[id(p)] if by_id[id(p)] is not None else torch.zeros_like(p)
                            for p in params])
            return out[0], out[1]
        """),)),
    "vector-jacobian-product": Target((3,), (src("""
        def vjp(f, x, u):
            return torch.autograd.functional.vjp(f, x, u)[1]
        """),)),
    "checkpoint-every-block": Target((1,), (src("""
        from torch.utils.checkpoint import checkpoint

        def checkpointed_forward(blocks, x):
            h = x
            for block in blocks:
                h = checkpoint(lambda t, b=block: b(t), h, use_reentrant=False)
            return h
        """),)),
    "train-or-eval-step-set-grad-enabled": Target((2, 3), (src("""
        def run_batch(model, x, y, train):
            if train:
                model.train()
                loss = F.mse_loss(model(x), y)
                loss.backward()
                return loss
            model.eval()
            with torch.no_grad():
                return F.mse_loss(model(x), y)
        """),)),
    "pairwise-distances-without-the-big-temporary": Target((2,), (src("""
        def pairwise_sq_dists(a, b):
            return ((a * a).sum(1, keepdim=True) + (b * b).sum(1) - 2 * (a @ b.T)).clamp_min(0)
        """),)),
    "predict-restores-modes": Target((2, 3, 4), (src("""
        def predict(model, x):
            modes = {m: m.training for m in model.modules()}
            model.train(False)
            try:
                with torch.set_grad_enabled(False):
                    return model(x)
            finally:
                for m, mode in modes.items():
                    m.training = mode
        """),)),
    "freeze-all-but": Target((4, 5), (src("""
        def freeze_all_but(model, keep):
            kept = {id(p) for name in keep for p in model.get_submodule(name).parameters()}
            for p in model.parameters():
                p.requires_grad_(id(p) in kept)
            return [n for n, p in model.named_parameters() if p.requires_grad]
        """),)),
    "freeze-batchnorm-layers": Target((1, 4), (src("""
        def freeze_batchnorm(model):
            for m in model.modules():
                if isinstance(m, nn.modules.batchnorm._BatchNorm):
                    m.train(False)
                    if m.affine:
                        m.weight.requires_grad = False
                        m.bias.requires_grad = False
            return model
        """),)),
    "frozen-backbone-features": Target((3, 5), (src("""
        def extract_features(backbone, x):
            with torch.set_grad_enabled(False):
                return backbone(x)
        """),)),
    "move-nested-batch-to-device": Target((4,), (src("""
        def to_device(batch, device, dtype=None, non_blocking=False):
            def move(obj):
                if torch.is_tensor(obj):
                    cast = dtype if dtype is not None and obj.is_floating_point() else obj.dtype
                    return obj.to(device=device, dtype=cast, non_blocking=non_blocking)
                if isinstance(obj, dict):
                    return {k: move(v) for k, v in obj.items()}
                if isinstance(obj, tuple) and hasattr(obj, "_fields"):
                    return type(obj)._make(move(v) for v in obj)
                if isinstance(obj, (list, tuple)):
                    return type(obj)(move(v) for v in obj)
                return obj
            return move(batch)
        """),)),
}


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> Any:
    """Jobs run with one thread in the sandbox too; tiny ops with more threads are slower here."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@functools.lru_cache(maxsize=1)
def bank_items() -> dict[str, Item]:
    return {item.id: item for item in load_bank()}


def item_of(item_id: str) -> Item:
    return bank_items()[item_id]


def mismatch(item: Item, expected: Any, got: Any) -> str:
    """The runner's comparison with the item's tolerances (its defaults otherwise): "" when equal."""
    return compare(expected, got, rtol=item.tolerances.get("rtol", 1e-5), atol=item.tolerances.get("atol", 1e-8))


def observations(item: Item, code: str, role: str = "submission") -> list[Any]:
    """Each case's decoded observation (None where the code raised), through the runner's harness."""
    payload = {"role": role, "code": code, "setup": item.setup, "probe": item.probe,
               "entrypoint": item.entrypoint, "seed": 0, "max_observation_bytes": 16 << 20}
    try:
        out = run_code_job(payload)
    finally:
        torch.set_grad_enabled(True)  # a wrong answer may leave it off; the next job starts clean
    header = dict(out["header"])
    final_check = header.pop("restore", None)  # what runner.harness.run() calls before writing the frame
    if callable(final_check):
        final_check()
    header, blobs = split_frame(out["encoder"].frame(header))
    assert header["status"] == "ok", header.get("error")
    decoder = Decoder(header, blobs)
    return [None if case["obs"] is None else decoder.decode(case["obs"]) for case in header["cases"]]


@functools.cache
def reference_observations(item_id: str) -> tuple[Any, ...]:
    item = item_of(item_id)
    obs = observations(item, item.reference, role="reference")
    assert all(o is not None for o in obs), f"{item_id}: the reference raised"
    return tuple(obs)


def is_flag(value: Any) -> bool:
    """What a forger can set without solving: booleans, ints, None, strings, dtypes, type names."""
    return value is None or isinstance(value, (bool, int, str, OpaqueObject))


def forge(ref: Any, got: Any) -> Any:
    """What a player who knows the right flags sends: the reference's structure and flag leaves,
    and only the values (tensor data, floats) the submission really produced."""
    if isinstance(ref, dict):
        got = got if isinstance(got, dict) else {}
        return {k: forge(v, got.get(k)) for k, v in ref.items()}
    if isinstance(ref, (list, tuple)):
        got = got if isinstance(got, (list, tuple)) else ()
        return type(ref)(forge(r, got[i] if i < len(got) else None) for i, r in enumerate(ref))
    if is_flag(ref):
        return ref
    return got


def has_values(obs: Any) -> bool:
    """The runner's "evidence": "values": a tensor with data, or a float."""
    if isinstance(obs, TensorMeta):
        return obs.data is not None and obs.data.numel() > 0
    if isinstance(obs, (float, complex)) and not isinstance(obs, bool):
        return True
    if isinstance(obs, dict):
        return any(has_values(v) for v in obs.values())
    if isinstance(obs, (list, tuple)):
        return any(has_values(v) for v in obs)
    return False


def test_every_target_is_a_code_item_with_those_wrong_answers() -> None:
    for item_id, target in TARGETS.items():
        item = item_of(item_id)
        assert item.kind == "code" and item.probe, item_id
        assert all(1 <= i <= len(item.wrong) for i in target.wrong), item_id


@pytest.mark.parametrize("item_id", sorted(TARGETS))
def test_correct_solutions_still_match(item_id: str) -> None:
    """Honest: the reference run as a submission, and other correct solutions, match every case."""
    item = item_of(item_id)
    expected = reference_observations(item_id)
    assert any(has_values(o) for o in expected), f"{item_id}: the reference observes no values at all"
    for n, code in enumerate((item.reference, *TARGETS[item_id].alternatives)):
        got = observations(item, code)
        for case, (exp, obs) in enumerate(zip(expected, got, strict=True)):
            assert obs is not None, f"{item_id}: correct solution {n} raised in case {case}"
            assert mismatch(item, exp, obs) == "", f"{item_id}: correct solution {n}, case {case}"


@pytest.mark.parametrize("item_id,wrong", [(i, w) for i in sorted(TARGETS) for w in TARGETS[i].wrong])
def test_a_flag_forger_still_fails(item_id: str, wrong: int) -> None:
    item = item_of(item_id)
    expected = reference_observations(item_id)
    got = observations(item, item.wrong[wrong - 1].code)
    compared = [(exp, obs) for exp, obs in zip(expected, got, strict=True) if obs is not None]
    assert compared, f"{item_id}: wrong answer {wrong} raised on every case, so there is nothing to forge"
    honest = [mismatch(item, exp, obs) for exp, obs in compared]
    assert any(honest), f"{item_id}: wrong answer {wrong} passes even without forging"
    forged = [mismatch(item, exp, forge(exp, obs)) for exp, obs in compared]
    assert any(forged), (f"{item_id}: wrong answer {wrong} ({item.wrong[wrong - 1].why}) passes once its "
                         "flags are forged; only values should decide")


def test_the_forger_is_a_real_threat_to_a_flag_probe() -> None:
    """The forger itself: against a probe that only reports a storage-sharing flag (the old
    nchw-to-nhwc-view probe), a copying answer fails honestly and passes forged."""
    item = item_of("nchw-to-nhwc-view")
    flag_probe = src("""
        def probe(result, args, kwargs, call):
            x = args[0]
            shares = (isinstance(result, torch.Tensor)
                      and result.untyped_storage().data_ptr() == x.untyped_storage().data_ptr())
            return {"result": result, "shares_storage_with_input": shares}
        """)
    old = dataclasses.replace(item, probe=flag_probe)
    expected = observations(old, old.reference, role="reference")
    got = observations(old, "def nchw_to_nhwc(x):\n    return x.permute(0, 2, 3, 1).contiguous()\n")
    assert any(mismatch(old, e, g) for e, g in zip(expected, got, strict=True))
    assert not any(mismatch(old, e, forge(e, g)) for e, g in zip(expected, got, strict=True))
