"""A plain, pickle-free format for observations crossing from a sandbox to the trusted parent.

A frame is `MAGIC | u32 header length | JSON header | blobs`. The JSON tree describes values;
tensors point at raw little-endian blobs. Decoding never runs code from the sandbox: it parses
JSON and copies bytes into fresh tensors of whitelisted dtypes, with bounds on everything.
"""
from __future__ import annotations

import ctypes
import json
import math
import struct
from typing import Any

MAGIC = b"QZW1"
# "case i starts" marks, written ahead of the frame, so that a job killed mid-way (time,
# memory) can still say which case was running. They only ever label a message.
PROGRESS = b"QZP1"
PROGRESS_SIZE = 8
MAX_DEPTH = 24
MAX_NODES = 200_000
# Bounds that keep the trusted parent's decoding cheap whatever a frame holds: the JSON header
# is parsed whole, so it is capped; the progress marks are capped by the case count.
MAX_HEADER_BYTES = 8 << 20
MAX_CASES = 4096


class WireError(ValueError):
    """The frame is malformed: a bug, or a submission that tampered with the result channel."""


# dtype name -> (itemsize, torch attribute). Kept as names so encoding in the sandbox and
# decoding in the parent agree without importing torch here.
DTYPES: dict[str, int] = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2,
    "complex128": 16, "complex64": 8,
    "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1,
    "uint16": 2, "uint32": 4, "uint64": 8,
    "bool": 1,
    "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1,
    "float8_e8m0fnu": 1, "complex32": 4,
}
TENSOR_KEYS = frozenset({"t", "kind", "dtype", "shape", "device", "requires_grad", "layout", "blob"})


class Encoder:
    """Encodes observation trees; used inside the sandbox by the harness."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.blobs: list[bytes] = []
        self.size = 0
        self.nodes = 0

    def encode(self, value: Any, depth: int = 0) -> Any:
        import torch  # only ever called where torch is loaded

        self.nodes += 1
        if self.nodes > MAX_NODES or depth > MAX_DEPTH:
            raise WireError("observation too large or too deeply nested")
        if value is None:
            return {"t": "none"}
        tp = type(value)
        if tp is bool:
            return {"t": "bool", "v": value}
        if tp is int:
            return {"t": "int", "v": str(value)}
        if tp is float:
            return {"t": "float", "v": _float_text(value)}
        if tp is complex:
            return {"t": "complex", "re": _float_text(value.real), "im": _float_text(value.imag)}
        if tp is str:
            if len(value) > 100_000:
                raise WireError("string observation too long")
            return {"t": "str", "v": value}
        if tp is list or tp is tuple:
            return {"t": tp.__name__, "v": [self.encode(v, depth + 1) for v in value]}
        if tp is dict:
            items = []
            for k, v in value.items():
                if type(k) is not str:
                    k = repr(k) if type(k) in (int, float, bool, tuple) else f"<{type(k).__name__}>"
                items.append([k, self.encode(v, depth + 1)])
            return {"t": "dict", "v": items}
        if tp is torch.dtype:
            return {"t": "dtype", "v": str(value).removeprefix("torch.")}
        if tp is torch.Size:
            return {"t": "tuple", "v": [{"t": "int", "v": str(int(d))} for d in value]}
        if isinstance(value, torch.Tensor):
            return self._tensor(value, torch)
        return {"t": "object", "type": _type_name(tp)}

    def _tensor(self, t: Any, torch: Any) -> dict[str, Any]:
        tp = type(t)
        kind = "Tensor" if tp is torch.Tensor else "Parameter" if tp is torch.nn.Parameter else None
        if kind is None:
            # A subclass may override every method: never call into it, just say what it is.
            return {"t": "tensor", "kind": f"subclass:{_type_name(tp)}"}
        node: dict[str, Any] = {
            "t": "tensor", "kind": kind,
            "dtype": str(t.dtype).removeprefix("torch."),
            "shape": [int(d) for d in t.shape],
            "device": t.device.type,
            "requires_grad": bool(t.requires_grad),
            "layout": str(t.layout).removeprefix("torch."),
        }
        if t.device.type == "meta":
            return node  # a meta tensor has no values; only another meta tensor can match it
        if node["dtype"] not in DTYPES:
            raise WireError(f"cannot send a tensor of dtype {node['dtype']}")
        data = t.detach()
        if t.layout != torch.strided:
            data = data.to_dense()
        data = data.to("cpu").contiguous()
        if data.is_conj():
            data = data.resolve_conj()
        if data.is_neg():
            data = data.resolve_neg()
        nbytes = data.numel() * DTYPES[node["dtype"]]
        if self.size + nbytes > self.max_bytes:
            raise WireError(f"observations exceed {self.max_bytes // 1024} KiB")
        # ctypes, not .numpy(): importing numpy would cost every job ~100 ms
        raw = ctypes.string_at(data.data_ptr(), nbytes) if nbytes else b""
        node["blob"] = len(self.blobs)
        self.blobs.append(raw)
        self.size += nbytes
        return node

    def frame(self, header: dict[str, Any]) -> bytes:
        offsets, pos = [], 0
        for b in self.blobs:
            offsets.append([pos, len(b)])
            pos += len(b)
        header = dict(header, blobs=offsets)
        text = json.dumps(header, allow_nan=False).encode()
        return MAGIC + struct.pack("<I", len(text)) + text + b"".join(self.blobs)


def _float_text(x: float) -> Any:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def _type_name(tp: type) -> str:
    return f"{getattr(tp, '__module__', '?')}.{getattr(tp, '__qualname__', '?')}"[:200]


def progress_mark(case_index: int) -> bytes:
    return PROGRESS + struct.pack("<I", case_index)


def split_progress(data: bytes, max_marks: int = MAX_CASES + 1) -> tuple[int | None, bytes | None]:
    """The last case a job started (None if it marked none) and the frame after the marks.

    A job writes one mark per case, so there are at most `max_marks`; more is a forged stream
    (`WireError`). The marks are fixed-size records, so the scan is bounded by that count."""
    last: int | None = None
    pos = 0
    count = 0
    while data[pos:pos + 4] == PROGRESS and len(data) - pos >= PROGRESS_SIZE:
        count += 1
        if count > max_marks:
            raise WireError("too many progress marks")
        (last,) = struct.unpack_from("<I", data, pos + 4)
        pos += PROGRESS_SIZE
    return last, (data[pos:] or None)


def split_frame(data: bytes, max_header: int = MAX_HEADER_BYTES) -> tuple[dict[str, Any], memoryview]:
    """Parse the JSON header of a frame; returns it with the blob area."""
    if len(data) < 8 or data[:4] != MAGIC:
        raise WireError("no result frame")
    (n,) = struct.unpack("<I", data[4:8])
    if 8 + n > len(data):
        raise WireError("truncated result frame")
    if n > max_header:
        raise WireError("result header too large")
    try:
        header = json.loads(bytes(data[8:8 + n]).decode())
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise WireError(f"bad result header: {type(e).__name__}") from None
    if not isinstance(header, dict):
        raise WireError("bad result header")
    return header, memoryview(data)[8 + n:]


class Decoder:
    """Turns a header tree back into Python values and fresh tensors, validating as it goes.

    Fails closed: a part that is missing, extra, of the wrong type, or inconsistent (a blob
    table with gaps, overlaps or trailing bytes, a blob used twice or never) is a `WireError`,
    never a default. Memory is bounded by the frame: each blob becomes at most one tensor."""

    def __init__(self, header: dict[str, Any], blob_area: memoryview) -> None:
        blobs = header.get("blobs")
        if not isinstance(blobs, list) or len(blobs) > MAX_NODES:
            raise WireError("bad blob table")
        self.blobs: list[memoryview] = []
        pos = 0
        for entry in blobs:
            # blobs are laid end to end in order: no gaps, no overlaps, no bytes left over
            if (not isinstance(entry, list) or len(entry) != 2
                    or not all(type(v) is int for v in entry)
                    or entry[0] != pos or entry[1] < 0 or pos + entry[1] > len(blob_area)):
                raise WireError("bad blob table")
            self.blobs.append(blob_area[pos:pos + entry[1]])
            pos += entry[1]
        if pos != len(blob_area):
            raise WireError("bad blob table")
        self.used = [False] * len(self.blobs)
        self.nodes = 0

    def finish(self) -> None:
        """Every blob must have been used by exactly one tensor."""
        if not all(self.used):
            raise WireError("a blob no tensor uses")

    def decode(self, node: Any, depth: int = 0) -> Any:
        self.nodes += 1
        if self.nodes > MAX_NODES or depth > MAX_DEPTH or not isinstance(node, dict):
            raise WireError("malformed observation")
        t = node.get("t")
        if t == "tensor":
            return self._tensor(node)
        keys = _NODE_KEYS.get(t) if isinstance(t, str) else None
        if keys is None or node.keys() != keys:
            raise WireError("malformed observation")
        if t == "none":
            return None
        if t == "bool":
            return _check(node["v"], bool)
        if t == "int":
            text = _check(node["v"], str)
            if len(text) > 5000:
                raise WireError("integer too long")
            try:
                return int(text)
            except ValueError:
                raise WireError("bad integer") from None
        if t == "float":
            return _float_value(node["v"])
        if t == "complex":
            return complex(_float_value(node["re"]), _float_value(node["im"]))
        if t == "str":
            return _check(node["v"], str)
        if t in ("list", "tuple"):
            seq = [self.decode(v, depth + 1) for v in _check(node["v"], list)]
            return seq if t == "list" else tuple(seq)
        if t == "dict":
            out: dict[str, Any] = {}
            for pair in _check(node["v"], list):
                if not isinstance(pair, list) or len(pair) != 2 or type(pair[0]) is not str or pair[0] in out:
                    raise WireError("malformed dict")
                out[pair[0]] = self.decode(pair[1], depth + 1)
            return out
        if t == "dtype":
            return DtypeName(_check(node["v"], str)[:40])
        return OpaqueObject(_check(node["type"], str)[:200])  # t == "object"

    def _tensor(self, node: dict[str, Any]) -> Any:
        import torch

        kind = _check(node.get("kind"), str)[:250]
        if kind not in ("Tensor", "Parameter"):
            if node.keys() != {"t", "kind"}:
                raise WireError("malformed observation")
            return OpaqueTensor(kind)
        meta_device = node.get("device") == "meta"
        if node.keys() != (TENSOR_KEYS - {"blob"} if meta_device else TENSOR_KEYS):
            raise WireError("malformed tensor")  # a tensor's values are never optional
        dtype_name = _check(node["dtype"], str)
        shape = _check(node["shape"], list)
        if len(shape) > 64 or not all(type(d) is int and 0 <= d < 2**40 for d in shape):
            raise WireError("bad tensor shape")
        if dtype_name not in DTYPES:
            raise WireError("bad tensor dtype")
        meta = TensorMeta(
            kind=kind, dtype=dtype_name, shape=tuple(shape),
            device=_check(node["device"], str)[:40],
            requires_grad=_check(node["requires_grad"], bool),
            layout=_check(node["layout"], str)[:40],
        )
        if meta_device:
            return meta
        index = node["blob"]
        if type(index) is not int or not 0 <= index < len(self.blobs) or self.used[index]:
            raise WireError("bad tensor blob")
        self.used[index] = True
        blob = self.blobs[index]
        numel = math.prod(shape)
        if numel * DTYPES[dtype_name] != len(blob):
            raise WireError("tensor size does not match its data")
        dtype = getattr(torch, dtype_name)
        if numel == 0:
            data = torch.empty(shape, dtype=dtype)
        else:
            data = torch.frombuffer(bytearray(blob), dtype=torch.uint8).view(dtype).reshape(shape)
        meta.data = data
        return meta


_NODE_KEYS: dict[str, frozenset[str]] = {
    "none": frozenset({"t"}), "bool": frozenset({"t", "v"}), "int": frozenset({"t", "v"}),
    "float": frozenset({"t", "v"}), "complex": frozenset({"t", "re", "im"}), "str": frozenset({"t", "v"}),
    "list": frozenset({"t", "v"}), "tuple": frozenset({"t", "v"}), "dict": frozenset({"t", "v"}),
    "dtype": frozenset({"t", "v"}), "object": frozenset({"t", "type"}),
}


def _check(value: Any, tp: type) -> Any:
    if type(value) is not tp:
        raise WireError("malformed observation")
    return value


def _float_value(v: Any) -> float:
    if v == "nan":
        return math.nan
    if v == "inf":
        return math.inf
    if v == "-inf":
        return -math.inf
    if type(v) in (int, float):
        return float(v)
    raise WireError("bad float")


class DtypeName(str):
    """A `torch.dtype` observed in the sandbox, compared by name."""


class OpaqueObject:
    """An observed value of a type the wire does not carry. It never equals anything: a probe
    must turn what it checks into values the wire carries."""

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<{self.type_name}>"


class OpaqueTensor(OpaqueObject):
    """A tensor subclass: never trusted, never equal to a real tensor."""


class TensorMeta:
    """A decoded tensor: its metadata as observed, and a fresh CPU copy of its values (None only
    on the meta device, which has none)."""

    def __init__(self, kind: str, dtype: str, shape: tuple[int, ...], device: str,
                 requires_grad: bool, layout: str) -> None:
        self.kind, self.dtype, self.shape, self.device = kind, dtype, shape, device
        self.requires_grad, self.layout = requires_grad, layout
        self.data: Any = None
