"""Ranks mode: one job, N processes in a gloo process group, per-rank observations.

An item that says `ranks: N` is graded like this, inside the job's sandbox. The harness process
builds the cases (trusted setup), then forks N ranks and becomes their coordinator; it never
loads the player's code itself. Each rank joins a gloo group over the job's own loopback (a
FileStore in its scratch directory), loads the code, runs every case in the same order and
probes the result in its own process, and streams each case's observation to the coordinator.
A case's observation is {"rank 0": ..., "rank 1": ...}, so a reference and a submission are compared
rank by rank in the parent like any other observation.

Failure modes, each with its own message: a rank that raises in a case is that case's error
("rank 1: ValueError: ..."); a rank that dies (a signal, os._exit) fails the case it was in and
every later one; the others are stopped two seconds later, since they would wait for it in the
next collective forever. A rank that hangs holds the others in a collective until the job's
wall limit: a `timeout` naming the case (rank 0 writes the "case i starts" marks).
Time, memory and processes are the job's limits, counted over all ranks together by the
supervisor outside the sandbox.

Ranks send observations as `torch.save` bytes; the coordinator reads them with
`torch.load(weights_only=True)`, which builds only tensors and plain containers. Everything here
runs inside the sandbox: a rank can lie about its own observations as a single-process
submission can, and the parent's strict decoding of the frame is what grades.
"""
from __future__ import annotations

import io
import os
import select
import signal
import struct
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from .wire import WireError

GRACE_S = 2.0  # after a rank failed, how long the others may take to notice before they are stopped
_LEN = struct.Struct("<Q")


def _send(fd: int, message: Any) -> None:
    import torch

    buf = io.BytesIO()
    torch.save(message, buf)
    data = buf.getvalue()
    view = memoryview(_LEN.pack(len(data)) + data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _rank_main(rank: int, world: int, wfd: int, payload: dict[str, Any], cases: list[dict[str, Any]],
               probe_fn: Callable[..., Any] | None) -> None:
    """One rank: join the group, load the code, run every case, report each; never returns."""
    from . import harness

    code = 0
    try:
        os.environ.update({"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank),
                           "LOCAL_WORLD_SIZE": str(world), "MASTER_PORT": "29500"})
        import torch.distributed as dist

        wall = float(payload.get("limits", {}).get("wall_s", 30))
        try:
            dist.init_process_group("gloo", init_method="file://" + os.path.abspath(".quiz-rank-store"),
                                    rank=rank, world_size=world, timeout=timedelta(seconds=max(5.0, wall)))
        except BaseException as e:  # noqa: BLE001 - the runner's own fault: lo down, no gloo...
            _send(wfd, ("harness", {"type": type(e).__name__, "message": f"rank {rank} could not join the group: {e}"[:500],
                                    "traceback": ""}))
            os._exit(0)
        header: dict[str, Any] = {"status": "ok", "error": None, "tampered": []}
        snapshot = harness.TorchSnapshot()
        restore = harness._restorer(snapshot, header)
        fn = harness.load_entrypoint(payload, header)
        if fn is None:
            _send(wfd, ("status", header["status"], header["error"]))
            os._exit(0)
        for i, case in enumerate(cases):
            _send(wfd, ("start", i))
            outcome, value = harness.run_case(fn, case, probe_fn, payload, restore)
            restore()
            _send(wfd, ("case", i, outcome, value, list(header["tampered"])))
        header["restore"]()
        _send(wfd, ("done", list(header["tampered"])))
        if dist.is_initialized():
            dist.destroy_process_group()
    except BaseException:  # noqa: BLE001 - e.g. an observation torch.save cannot write
        code = 3
    os._exit(code)


class _Rank:
    def __init__(self, index: int, pid: int, fd: int) -> None:
        self.index, self.pid, self.fd = index, pid, fd
        self.buffer = b""
        self.done = False  # sent "done" (or a load status)
        self.eof = False
        self.exit: str = ""  # how it ended, for messages
        self.stopped = False  # killed by the coordinator after another rank failed
        self.next_case = 0  # the first case it has not finished
        self.running = -1  # the case it last started


def run_ranks(payload: dict[str, Any], world: int, cases: list[dict[str, Any]],
              probe_fn: Callable[..., Any] | None, header: dict[str, Any], enc: Any,
              started: Callable[[int], None]) -> None:
    """The coordinator: fork the ranks, collect what each reports, fill the header's cases."""
    import torch

    max_message = int(payload.get("max_observation_bytes", 16 << 20))
    encode = enc.encode
    ranks: list[_Rank] = []
    for r in range(world):
        rfd, wfd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(rfd)
            for other in ranks:
                os.close(other.fd)
            _rank_main(r, world, wfd, payload, cases, probe_fn)
        os.close(wfd)
        ranks.append(_Rank(r, pid, rfd))

    outcomes: list[list[tuple[str, Any] | None]] = [[None] * world for _ in cases]
    load_status: tuple[int, str, Any] | None = None
    harness_error: dict[str, Any] | None = None
    trouble_at: float | None = None
    tampered: list[str] = header["tampered"]
    marked = -1

    def handle(rank: _Rank, message: Any) -> None:
        nonlocal load_status, harness_error, trouble_at
        kind = message[0]
        if kind == "start":
            rank.running = message[1]
        elif kind == "case":
            _, i, outcome, value, seen = message
            outcomes[i][rank.index] = (outcome, value)
            rank.next_case = i + 1
            if outcome == "error" and trouble_at is None:
                trouble_at = time.monotonic()
            tampered.extend(t for t in seen if t not in tampered)
        elif kind == "done":
            rank.done = True
            tampered.extend(t for t in message[1] if t not in tampered)
        elif kind == "status":
            rank.done = True
            if load_status is None:
                load_status = (rank.index, message[1], message[2])
            trouble_at = trouble_at or time.monotonic()
        elif kind == "harness":
            rank.done = True
            harness_error = harness_error or message[1]
            trouble_at = trouble_at or time.monotonic()

    while not all(r.eof for r in ranks):
        live = [r for r in ranks if not r.eof]
        ready, _, _ = select.select([r.fd for r in live], [], [], 0.1)
        for rank in live:
            if rank.fd not in ready:
                continue
            chunk = os.read(rank.fd, 1 << 20)
            if not chunk:
                rank.eof = True
                if not rank.done and trouble_at is None:
                    trouble_at = time.monotonic()
                continue
            rank.buffer += chunk
            while len(rank.buffer) >= _LEN.size:
                (size,) = _LEN.unpack_from(rank.buffer)
                if size > max_message:
                    raise WireError(f"rank {rank.index} sent an observation of {size} bytes")
                if len(rank.buffer) < _LEN.size + size:
                    break
                data, rank.buffer = rank.buffer[_LEN.size:_LEN.size + size], rank.buffer[_LEN.size + size:]
                handle(rank, torch.load(io.BytesIO(data), weights_only=True))
        # "case i starts" marks follow the slowest rank, so a timeout names the case it is stuck in
        slowest = min((r.running for r in ranks if not r.done and not r.eof), default=-1)
        if slowest > marked:
            marked = slowest
            started(slowest)
        if trouble_at is not None and time.monotonic() - trouble_at > GRACE_S:
            for rank in ranks:
                if not rank.eof and not rank.stopped:
                    rank.stopped = True
                    _kill(rank.pid)
    for rank in ranks:
        os.close(rank.fd)
        how = _reap(rank.pid)
        if not rank.stopped and not rank.done:
            rank.exit = how or "exited"

    if harness_error is not None:
        raise RuntimeError(harness_error["message"])
    if load_status is not None:
        index, status, error = load_status
        header["status"], header["error"] = status, error
        return
    for i, slot in enumerate(header["cases"]):
        got = outcomes[i]
        if all(o is not None and o[0] == "obs" for o in got):
            try:
                slot["obs"] = encode({f"rank {r}": o[1] for r, o in enumerate(got) if o is not None})
            except WireError as e:
                slot["error"] = {"type": "OutputLimit" if "exceed" in str(e) else "BadResult",
                                 "message": str(e), "traceback": ""}
            continue
        slot["error"] = _case_error(i, got, ranks)


def _case_error(i: int, got: list[tuple[str, Any] | None], ranks: list[_Rank]) -> dict[str, Any]:
    """Why case i has no observation from every rank, in the player's terms: a rank that died
    first, then a rank's own error before the errors the others got from the broken group."""
    errors = [(r, o[1]) for r, o in enumerate(got) if o is not None and o[0] == "error"]
    for rank in ranks:
        if got[rank.index] is None and rank.exit and rank.next_case == i:
            return {"type": "RankDied", "message": f"rank {rank.index} {rank.exit} while running this case",
                    "traceback": ""}
        if got[rank.index] is None and rank.exit and rank.next_case < i:
            return {"type": "RankDied", "message": f"rank {rank.index} {rank.exit} while running case "
                                                   f"{rank.next_case + 1}, so this case did not run", "traceback": ""}
    errors.sort(key=lambda e: _from_the_group(e[1]))
    if errors:
        r, info = errors[0]
        info = dict(info)
        info["message"] = f"rank {r}: {info.get('message', '')}"
        return info
    missing = [str(r) for r, o in enumerate(got) if o is None]
    return {"type": "RankStopped", "message": f"rank {', '.join(missing)} did not finish this case: "
                                              "another rank failed earlier and the group was stopped",
            "traceback": ""}


def _from_the_group(info: dict[str, Any]) -> bool:
    """An error a rank got because another one failed (gloo's reset or timeout), not its own."""
    text = f"{info.get('type', '')} {info.get('message', '')}"
    return "DistBackendError" in text or "gloo" in text.lower()


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _reap(pid: int) -> str:
    """Wait for a rank; how it ended, or "" when it exited cleanly."""
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return ""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        return f"was killed by {name}"
    code = os.WEXITSTATUS(status)
    return "" if code == 0 else f"exited with code {code}"
