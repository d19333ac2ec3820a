"""Trusted comparison of observations, done in the parent on decoded data.

Messages say *what* differs (type, dtype, shape, device, values) and where, but never the
hidden expected values: players learn from the message without being handed the answer.
"""
from __future__ import annotations

import math
from typing import Any

from .wire import DtypeName, OpaqueObject, OpaqueTensor, TensorMeta


class Mismatch(Exception):
    pass


def compare(expected: Any, got: Any, *, rtol: float, atol: float, path: str = "result") -> str:
    """Return "" when `got` matches `expected`, else a short message without hidden values."""
    try:
        _compare(expected, got, rtol, atol, path)
    except Mismatch as e:
        return str(e)
    return ""


def describe(value: Any) -> str:
    if isinstance(value, TensorMeta):
        return "a tensor" if value.kind == "Tensor" else "an nn.Parameter"
    if isinstance(value, OpaqueTensor):
        return f"a tensor subclass ({value.type_name.rsplit(':', 1)[-1]})"
    if isinstance(value, OpaqueObject):
        return f"an object of type {value.type_name}"
    if isinstance(value, DtypeName):
        return "a dtype"
    if value is None:
        return "None"
    return f"a {type(value).__name__}"


def _compare(exp: Any, got: Any, rtol: float, atol: float, path: str) -> None:
    if isinstance(exp, TensorMeta):
        _compare_tensor(exp, got, rtol, atol, path)
        return
    if isinstance(exp, OpaqueObject) or isinstance(got, OpaqueObject):
        # Fail closed: what the wire cannot carry cannot be checked, so it never matches (two
        # objects of the same type name prove nothing about their contents).
        if isinstance(exp, OpaqueObject):
            raise Mismatch(f"{path}: {describe(exp)} cannot be checked")
        raise Mismatch(f"{path}: expected {describe(exp)}, got {describe(got)}")
    if isinstance(exp, bool) or isinstance(got, bool):
        if type(exp) is not type(got):
            raise Mismatch(f"{path}: expected {describe(exp)}, got {describe(got)}")
        if exp != got:
            raise Mismatch(f"{path}: wrong boolean value")
        return
    if isinstance(exp, (int, float)) and isinstance(got, (int, float)):
        if isinstance(exp, int) and isinstance(got, int):
            if exp != got:
                raise Mismatch(f"{path}: wrong value")
            return
        if not _close(_as_float(exp, path), _as_float(got, path), rtol, atol):
            raise Mismatch(f"{path}: wrong value (outside rtol={rtol:g}, atol={atol:g})")
        return
    if isinstance(exp, complex) and isinstance(got, (complex, int, float)):
        g = complex(_as_float(got, path)) if isinstance(got, int) else complex(got)
        if not (_close(exp.real, g.real, rtol, atol) and _close(exp.imag, g.imag, rtol, atol)):
            raise Mismatch(f"{path}: wrong value")
        return
    if isinstance(exp, str):
        if not isinstance(got, str) or isinstance(exp, DtypeName) != isinstance(got, DtypeName):
            raise Mismatch(f"{path}: expected {describe(exp)}, got {describe(got)}")
        if exp != got:
            raise Mismatch(f"{path}: wrong {'dtype' if isinstance(exp, DtypeName) else 'text'}"
                           + (f" (got {got})" if isinstance(got, DtypeName) else ""))
        return
    if exp is None:
        if got is not None:
            raise Mismatch(f"{path}: expected None, got {describe(got)}")
        return
    if isinstance(exp, (list, tuple)):
        if type(got) is not type(exp):
            raise Mismatch(f"{path}: expected {describe(exp)}, got {describe(got)}")
        if len(exp) != len(got):
            raise Mismatch(f"{path}: expected {len(exp)} elements, got {len(got)}")
        for i, (e, g) in enumerate(zip(exp, got, strict=True)):
            _compare(e, g, rtol, atol, f"{path}[{i}]")
        return
    if isinstance(exp, dict):
        if not isinstance(got, dict):
            raise Mismatch(f"{path}: expected a dict, got {describe(got)}")
        missing = [k for k in exp if k not in got]
        extra = [k for k in got if k not in exp]
        if missing or extra:
            parts = []
            if missing:
                parts.append("missing keys " + ", ".join(map(repr, missing[:5])))
            if extra:
                parts.append("unexpected keys " + ", ".join(map(repr, extra[:5])))
            raise Mismatch(f"{path}: " + "; ".join(parts))
        for k in exp:
            _compare(exp[k], got[k], rtol, atol, f"{path}[{k!r}]" if path else str(k))
        return
    raise Mismatch(f"{path}: cannot compare {describe(exp)}")


def _as_float(v: int | float, path: str) -> float:
    try:
        return float(v)
    except OverflowError:  # an int past float range (10 ** 400) cannot be close to a float
        raise Mismatch(f"{path}: wrong value (an integer too large for a float)") from None


def _close(e: float, g: float, rtol: float, atol: float) -> bool:
    if math.isnan(e) or math.isnan(g):
        return math.isnan(e) and math.isnan(g)
    if math.isinf(e) or math.isinf(g):
        return e == g
    return abs(e - g) <= atol + rtol * abs(e)


def _compare_tensor(exp: TensorMeta, got: Any, rtol: float, atol: float, path: str) -> None:
    import torch

    if not isinstance(got, TensorMeta) or got.kind != exp.kind:
        raise Mismatch(f"{path}: expected {describe(exp)}, got {describe(got)}")
    if got.device != exp.device:
        raise Mismatch(f"{path}: wrong device (got {got.device})")
    if got.dtype != exp.dtype:
        raise Mismatch(f"{path}: wrong dtype (got {got.dtype})")
    if got.shape != exp.shape:
        raise Mismatch(f"{path}: wrong shape (got {tuple(got.shape)})")
    if got.layout != exp.layout:
        raise Mismatch(f"{path}: wrong layout (got {got.layout})")
    if got.requires_grad != exp.requires_grad:
        raise Mismatch(f"{path}: requires_grad is {got.requires_grad}, expected {exp.requires_grad}")
    if exp.data is None or got.data is None:
        # Only meta tensors have no values; anything else without them is never equal.
        if exp.device == "meta" and got.device == "meta" and exp.data is None and got.data is None:
            return
        raise Mismatch(f"{path}: the tensor's values are missing")
    e, g = exp.data, got.data
    if e.dtype.is_floating_point or e.dtype.is_complex:
        e64 = e.to(torch.complex128 if e.dtype.is_complex else torch.float64)
        g64 = g.to(e64.dtype)
        nan_e, nan_g = torch.isnan(e64), torch.isnan(g64)
        if not torch.equal(nan_e, nan_g):
            raise Mismatch(f"{path}: NaN in the wrong places ({int(nan_g.sum())} NaN, expected a different pattern)")
        ok = torch.isclose(e64, g64, rtol=rtol, atol=atol, equal_nan=True)
        if not bool(ok.all()):
            bad = int((~ok).sum())
            raise Mismatch(f"{path}: {bad} of {e.numel()} values differ (rtol={rtol:g}, atol={atol:g})")
    elif not torch.equal(e, g):
        bad = int((e != g).sum())
        raise Mismatch(f"{path}: {bad} of {e.numel()} values differ")
