"""What runs inside a job's sandbox: build the cases, load the code, call it, probe, report.

Everything here is on the untrusted side. The parent never believes a verdict from this code,
only observations, which it compares itself; a missing or broken frame counts as a failure.
"""
from __future__ import annotations

import builtins
import linecache
import math
import operator
import os
import random
import sys
import traceback
import types
from collections.abc import Callable
from typing import Any

from .wire import Encoder, WireError, progress_mark

SUBMISSION_FILE = "<your code>"
SNIPPET_FILE = "<snippet>"


def base_globals() -> dict[str, Any]:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    return {"__name__": "__quiz__", "__builtins__": builtins, "torch": torch, "nn": nn,
            "F": F, "math": math, "random": random}


def _seed(seed: int, device: str = "cpu") -> None:
    """Seed Python's and torch's generators before the cases are made. A `cpu` job seeds only the
    CPU generator: `torch.manual_seed` also queues a lazy CUDA seeding, which formats a stack
    trace, and no CUDA generator is used by a CPU job."""
    import torch

    random.seed(seed)
    if device == "cpu":
        torch.default_generator.manual_seed(seed)
    else:
        torch.manual_seed(seed)


def _error_info(exc: BaseException, filename: str, source: str) -> dict[str, Any]:
    """Exception type, message and a traceback limited to the player's own lines."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
    lines = []
    for f in frames[-6:]:
        lines.append(f'  line {f.lineno}, in {f.name}')
        if f.line:
            lines.append(f"    {f.line.strip()}")
    if isinstance(exc, SyntaxError) and exc.filename == filename:
        lines.append(f"  line {exc.lineno}")
        if exc.text:
            lines.append(f"    {exc.text.rstrip()}")
    message = str(exc)[:500]
    return {"type": type(exc).__name__, "message": message,
            "traceback": "\n".join(lines)[:2000]}


# The module names code runs under. Registered in sys.modules, so what looks a player's class
# or function up by name works: torch.save/torch.load of a class the player defined, pickling
# for DataLoader workers, flex_attention and torch.compile resolving globals.
CODE_MODULE = "__quiz__"
SETUP_MODULE = "__quiz_setup__"
PROBE_MODULE = "__quiz_probe__"


def _module_globals(name: str) -> dict[str, Any]:
    module = types.ModuleType(name)
    g = module.__dict__
    g.update(base_globals())
    g["__name__"] = name
    sys.modules[name] = module
    return g


def _load(source: str, filename: str) -> dict[str, Any]:
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    code = compile(source, filename, "exec", dont_inherit=True)
    g = _module_globals(CODE_MODULE)
    exec(code, g)
    return g


# Names a probe or a comparison leans on. Changing them is tampering; other attributes may
# legitimately change when code imports torch submodules lazily (torch._dynamo rewraps
# torch.manual_seed, for one), so those are only put back, never held against the player.
_TENSOR_CRITICAL = frozenset({
    "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__bool__", "__len__", "__getitem__",
    "__repr__", "__format__", "__float__", "__int__", "eq", "ne", "equal", "allclose", "isclose",
    "all", "any", "item", "tolist", "data_ptr", "untyped_storage", "storage_offset", "stride", "size",
    "dim", "numel", "is_contiguous", "grad", "requires_grad", "detach", "clone", "contiguous", "to",
    "cpu", "sum", "abs", "sub", "__sub__", "max", "min", "isnan", "shape", "dtype", "device",
    "backward", "register_hook", "is_leaf", "grad_fn", "view", "reshape",
})
_ALL = frozenset({"*"})  # every attribute that existed before the player's code: rebinding any is tampering
_CRITICAL = types.MappingProxyType({
    "torch": frozenset({"allclose", "equal", "isclose", "eq", "ne", "all", "any", "is_tensor", "is_same_size",
                        "isnan", "abs", "sub", "max", "min", "testing", "autograd", "Tensor", "tensor", "as_tensor"}),
    "torch.Tensor": frozenset(_TENSOR_CRITICAL),
    "torch._C.TensorBase": frozenset(_TENSOR_CRITICAL),
    "torch.nn.Module": frozenset({"state_dict", "parameters", "named_parameters", "buffers", "named_buffers",
                                  "children", "modules", "named_modules", "__call__", "_call_impl", "train", "eval"}),
    "torch.autograd": frozenset({"grad", "backward", "gradcheck", "Function"}),
    # What turns observations into the frame and writes it: the harness, the wire format and the
    # library functions they call. Wrapping any of them to rewrite observations is tampering.
    "runner.harness": _ALL, "runner.harness.TorchSnapshot": _ALL,
    "runner.wire": _ALL, "runner.wire.Encoder": _ALL,
    "json": frozenset({"dumps", "JSONEncoder", "encoder"}), "json.encoder": _ALL, "json.JSONEncoder": _ALL,
    "struct": _ALL, "ctypes": frozenset({"string_at", "_string_at", "c_char", "c_void_p"}),
    "os": frozenset({"write", "close", "_exit", "fdopen", "dup2", "read"}),
})


class TorchSnapshot:
    """Identity snapshot of the attributes a probe and the frame writer rely on.

    A submission may monkeypatch `torch.allclose`, `Tensor.__eq__`, the encoder, ... in its own
    process. Comparison happens in the parent, so that alone cannot make it pass; but a probe
    that uses torch, or an encoder that rewrites observations, could be fooled, so before each
    probe and before the frame is written the originals are put back, and a change to a name in
    `_CRITICAL` (or anything in `builtins`, `math`, `torch.testing`, `F`) is reported.
    """

    def __init__(self) -> None:
        import ctypes
        import json
        import json.encoder
        import struct

        import torch
        import torch.nn.functional as F
        import torch.testing

        from . import wire

        self.targets: list[tuple[str, Any]] = [
            ("torch", torch), ("torch.Tensor", torch.Tensor), ("torch._C.TensorBase", torch._C.TensorBase),
            ("torch.nn.functional", F), ("torch.testing", torch.testing), ("torch.autograd", torch.autograd),
            ("torch.nn.Module", torch.nn.Module), ("builtins", builtins), ("math", math),
            ("runner.harness", sys.modules[__name__]), ("runner.harness.TorchSnapshot", TorchSnapshot),
            ("runner.wire", wire), ("runner.wire.Encoder", wire.Encoder),
            ("json", json), ("json.encoder", json.encoder), ("json.JSONEncoder", json.JSONEncoder),
            ("struct", struct), ("ctypes", ctypes), ("os", os),
        ]
        # The rules travel with the snapshot, so rebinding the module's table changes nothing.
        self.rules = {name: _CRITICAL.get(name) for name, _obj in self.targets}
        self.saved = [(name, obj, dict(vars(obj))) for name, obj in self.targets]
        # The same, as key and value tuples in order: what `restore` checks first, at C speed.
        self.order = [(tuple(saved), tuple(saved.values())) for _name, _obj, saved in self.saved]

    def restore(self, _vars: Any = vars, _len: Any = len, _all: Any = all, _map: Any = map,
                _is: Any = operator.is_, _setattr: Any = setattr) -> list[str]:
        """Put changed attributes back; return the tampered critical names.

        A namespace whose keys and values are all the very objects saved, in the saved order and
        no more, is unchanged: it is passed over without the per-name loop (which would find
        nothing). The builtins used are bound when the harness is imported, before any player's
        code, so replacing `builtins.all` or `builtins.vars` cannot hide a change."""
        tampered: list[str] = []
        for (name, obj, saved), (keys, values) in zip(self.saved, self.order):  # noqa: B905 - same length
            current = _vars(obj)
            if (_len(current) == _len(keys) and _all(_map(_is, current, keys))
                    and _all(_map(_is, current.values(), values))):
                continue
            critical = self.rules[name]
            for key, value in saved.items():
                if current.get(key, _MISSING) is value:
                    continue
                if critical is None or critical is _ALL or key in critical:
                    tampered.append(f"{name}.{key}")
                try:
                    _setattr(obj, key, value)
                except (AttributeError, TypeError):
                    pass
            if critical is None and name != "builtins":
                # new names in math / torch.testing / F are suspicious; torch may grow submodules
                tampered += [f"{name}.{k}" for k in current if k not in saved and not k.startswith("__")]
        return tampered


_MISSING = object()


def _no_stamp(name: str) -> None:
    pass


def run_code_job(payload: dict[str, Any], started: Callable[[int], None] = lambda i: None,
                 stamp: Callable[[str], None] = _no_stamp) -> dict[str, Any]:
    """Build cases, load the code, run each case and its probe; return the frame header + encoder.

    `started(i)` is told before case i runs, so a job killed mid-way can name the case; `stamp`
    takes the benchmark's timestamps (`runner/trace.py`), a no-op unless it asked for them."""
    import torch

    enc = Encoder(max_bytes=int(payload.get("max_observation_bytes", 16 << 20)))
    header: dict[str, Any] = {"status": "ok", "error": None, "cases": [], "tampered": []}

    # 1. trusted setup, before any untrusted code is loaded
    _seed(int(payload.get("seed", 0)), str(payload.get("requires", "cpu")))
    stamp("seeded")
    setup_g = _module_globals(SETUP_MODULE)
    exec(compile(payload["setup"], "<setup>", "exec"), setup_g)
    cases = list(setup_g["make_cases"]())
    probe_fn = None
    if payload.get("probe"):
        probe_g = _module_globals(PROBE_MODULE)
        exec(compile(payload["probe"], "<probe>", "exec"), probe_g)
        probe_fn = probe_g["probe"]
    header["cases"] = [{"name": str(c.get("name") or f"case {i + 1}"), "example": bool(c.get("example", False)),
                        "obs": None, "error": None} for i, c in enumerate(cases)]
    ranks = int(payload.get("ranks", 1))
    if ranks > 1:
        from .ranks import run_ranks

        run_ranks(payload, ranks, cases, probe_fn, header, enc, started)
        del torch
        return {"header": header, "encoder": enc}
    stamp("cases")
    snapshot = TorchSnapshot()
    stamp("snapshot")
    # Bound now, before any untrusted code: rebinding the module's names later changes nothing
    # here (and is itself reported as tampering).
    restore = _restorer(snapshot, header)
    encode = enc.encode

    # 2. the player's code
    fn = load_entrypoint(payload, header)
    if fn is None:
        return {"header": header, "encoder": enc}

    # 3. the cases
    for i, case in enumerate(cases):
        slot = header["cases"][i]
        started(i)
        outcome, value = run_case(fn, case, probe_fn, payload, restore)
        if outcome == "obs":
            try:
                slot["obs"] = encode(value)
            except WireError as e:
                slot["error"] = {"type": "OutputLimit" if "exceed" in str(e) else "BadResult",
                                 "message": str(e), "traceback": ""}
        else:
            slot["error"] = value
        restore()
    stamp("ran")
    del torch
    return {"header": header, "encoder": enc}


def load_entrypoint(payload: dict[str, Any], header: dict[str, Any]) -> Callable[..., Any] | None:
    """Load the code and find its entrypoint; None (with the header's status set) when it cannot."""
    trusted = payload["role"] == "reference"
    code_file = "<reference>" if trusted else SUBMISSION_FILE
    source = payload["code"]
    try:
        g = _load(source, code_file)
    except SyntaxError as e:
        header["status"] = "invalid"
        header["error"] = _error_info(e, code_file, source)
        header["error"]["message"] = f"syntax error: {e.msg} (line {e.lineno})"
        return None
    except BaseException as e:  # noqa: BLE001 - anything the module body raised is the player's
        header["status"] = "error"
        header["error"] = _error_info(e, code_file, source)
        return None
    entry = payload["entrypoint"]
    fn = g.get(entry)
    if not callable(fn):
        header["status"] = "invalid"
        header["error"] = {"type": "MissingEntrypoint",
                           "message": f"define a function named `{entry}`"
                                      + ("" if fn is None else f" (`{entry}` is not callable)"),
                           "traceback": ""}
        return None
    return fn


def run_case(fn: Callable[..., Any], case: dict[str, Any], probe_fn: Callable[..., Any] | None,
             payload: dict[str, Any], restore: Callable[[], None]) -> tuple[str, Any]:
    """Call the entrypoint on one case and probe the result: ("obs", observation) or ("error", info)."""
    trusted = payload["role"] == "reference"
    code_file = "<reference>" if trusted else SUBMISSION_FILE
    args = list(case.get("args", ()))
    kwargs = dict(case.get("kwargs", {}))
    try:
        result = fn(*args, **kwargs)
    except BaseException as e:  # noqa: BLE001
        if isinstance(e, (KeyboardInterrupt, SystemExit)) and not trusted:
            e = RuntimeError(f"{type(e).__name__} raised while running your function")
        return "error", _error_info(e, code_file, payload["code"])
    restore()
    try:
        return "obs", (probe_fn(result, args, kwargs, fn) if probe_fn else {"result": result})
    except BaseException as e:  # noqa: BLE001 - the probe raised on this result
        return "error", {"type": type(e).__name__,
                         "message": f"checking your result raised {type(e).__name__}: {_probe_message(e)}",
                         "traceback": "", "in_probe": True}


def _probe_message(e: BaseException) -> str:
    """What a probe's exception says, unless it quotes a tensor: the probe works on the hidden
    case's inputs, and a KeyError or assertion that prints one would hand the player its values."""
    text = str(e)[:300]
    if "tensor(" in text or "Parameter containing" in text or "[[" in text:
        return "(its message quotes the hidden case's values, so it is not shown)"
    return text


def _restorer(snapshot: TorchSnapshot, header: dict[str, Any]) -> Callable[[], None]:
    """A closure over the original restore: put everything back, record what was changed."""
    restore_fn = TorchSnapshot.restore
    tampered: list[str] = header["tampered"]

    def restore() -> None:
        for name in restore_fn(snapshot):
            if name not in tampered and len(tampered) < 20:
                tampered.append(name)
    header["restore"] = restore  # run() checks once more just before the frame is written
    return restore


def run_output_job(payload: dict[str, Any]) -> dict[str, Any]:
    enc = Encoder(max_bytes=1)
    header: dict[str, Any] = {"status": "ok", "error": None, "cases": [], "tampered": []}
    _seed(int(payload.get("seed", 0)), str(payload.get("requires", "cpu")))
    source = payload["code"]
    try:
        _load(source, SNIPPET_FILE)
    except SyntaxError as e:
        header["status"] = "invalid"
        header["error"] = _error_info(e, SNIPPET_FILE, source)
    except BaseException as e:  # noqa: BLE001
        header["status"] = "error"
        header["error"] = _error_info(e, SNIPPET_FILE, source)
    return {"header": header, "encoder": enc}


def run_capabilities(payload: dict[str, Any]) -> dict[str, Any]:
    """Asked once at start-up, in a job process, so the zygote never initialises CUDA."""
    import importlib.util
    import shutil

    import torch

    caps: dict[str, Any] = {"torch": torch.__version__, "cuda": None, "features": []}
    if all(importlib.util.find_spec(m) is not None for m in ("onnx", "onnxscript", "onnxruntime")):
        caps["features"].append("onnx")
    if shutil.which("c++") or shutil.which("g++"):
        caps["features"].append("inductor")
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        caps["cuda"] = {"name": props.name, "memory_mb": props.total_memory // (1 << 20),
                        "count": torch.cuda.device_count(), "version": torch.version.cuda}
    return {"header": {"status": "ok", "error": None, "cases": [], "tampered": [], "caps": caps},
            "encoder": Encoder(max_bytes=1)}


WARM_UP_JOB = {
    "kind": "code", "role": "reference", "seed": 0, "requires": "cpu", "entrypoint": "solve",
    "setup": "def make_cases():\n    return [{'args': (torch.randn(3, 4), torch.randn(4))}, {'args': (torch.ones(2, 2), torch.zeros(2))}]\n",
    "code": "def solve(w, x):\n    return {'y': (w @ x).relu(), 'n': int(x.numel()), 'ok': True, 'f': float(x.sum())}\n",
    "probe": "def probe(result, args, kwargs, call):\n    return {'result': result, 'same': torch.equal(call(*args)['y'], result['y'])}\n",
    "max_observation_bytes": 1 << 20,
}


def warm_up() -> None:
    """In the zygote, once: one small grading of our own (no player's code), so the paths every
    job takes (compiling, the snapshot, probing, encoding, the frame; torch.manual_seed's lazy
    CUDA seeding and the source lines its stack trace reads) are loaded before the fork instead
    of in every job. Its modules and source lines are dropped afterwards; each job seeds again."""
    import torch

    torch.manual_seed(0)
    out = run_code_job(dict(WARM_UP_JOB))
    out["header"].pop("restore")()
    Encoder.frame(out["encoder"], out["header"])
    for name in (CODE_MODULE, SETUP_MODULE, PROBE_MODULE):
        sys.modules.pop(name, None)
    linecache.cache.pop("<reference>", None)


def run(payload: dict[str, Any], res_fd: int, stamp: Callable[[str], None] = _no_stamp) -> None:
    """Entry point in the job's PID 1 after lock-down. Writes one frame, then exits."""
    import torch

    threads = max(1, int(payload.get("threads", 1)))
    torch.set_num_threads(threads)
    if payload.get("requires") == "cuda" and payload.get("gpu_memory_fraction"):
        torch.cuda.set_per_process_memory_fraction(float(payload["gpu_memory_fraction"]))
    kind = payload["kind"]
    # The frame writer, bound before any untrusted code runs.
    frame_fn, write_all, mark = Encoder.frame, _write_all, progress_mark

    def started(case_index: int) -> None:
        write_all(res_fd, mark(case_index))

    try:
        if kind == "code":
            out = run_code_job(payload, started, stamp)
        else:
            out = {"output": run_output_job, "capabilities": run_capabilities}[kind](payload)
        final_check = out["header"].pop("restore", None)
        if final_check is not None:
            final_check()  # a thread or a finaliser may have patched the writer since the last case
        frame = frame_fn(out["encoder"], out["header"])
    except BaseException as e:  # noqa: BLE001 - a harness fault (e.g. a broken setup): report it
        info = {"type": type(e).__name__, "message": str(e)[:500],
                "traceback": "".join(traceback.format_exception(e))[-2000:]}
        frame = Encoder(max_bytes=1).frame({"status": "harness", "error": info, "cases": [], "tampered": []})
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001
        pass
    write_all(res_fd, frame)
    stamp("written")
    # Every channel closed, then exit: the parent answers once the frame is whole and nothing
    # can write any more, while this process's exit (freeing its copy of the zygote's memory)
    # is still under way.
    for fd in (res_fd, 1, 2):
        try:
            os.close(fd)
        except OSError:
            pass
    os._exit(0)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
