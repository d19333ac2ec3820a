"""Where a grading's time goes: CLOCK_MONOTONIC stamps in the parent, the zygote's side and the
job, for `bench/runner.py` only (`trace: true` in runner.yaml, a benchmark setting).

With tracing off nothing here runs: no page is mapped and no stamp is taken. With it on, the
job writes its stamps into a small shared anonymous page that its trusted parent (the zygote's
side, which forked it) mapped before the fork and reads once the job is over; the parent's own
stamps travel on the control channel. CLOCK_MONOTONIC is one clock for every process on the host
(jobs get no time namespace), so stamps from all three compare directly. The job may scribble on
its page: the stamps are printed by the benchmark and never judged.

`result.timings` then carries each stamp as `t_<name>`, in ms since the engine received the job.
"""
from __future__ import annotations

import mmap
import struct
import time
from collections.abc import Callable

# Stamps the job takes, in the order it takes them (its page holds one double each).
JOB_STAMPS = ("job_start", "job_ready", "job_go", "seeded", "cases", "snapshot", "ran", "written")

# What each stamp ends: the phase from the stamp before it (in time) up to this one.
LABELS = {
    "slot": "parent: wait for a free slot",
    "submit": "parent: payload and pipes",
    "submitted": "parent: request to the zygote",
    "sup_start": "zygote: fork of the supervisor",
    "sup_payload": "supervisor: read the payload",
    "sup_ns": "supervisor: unshare, id maps, lo up",
    "job_start": "fork of the job (PID 1)",
    "job_ready": "job: mounts, rlimits, caps, seccomp",
    "pid": "parent: pid message read",
    "attached": "parent: cgroup attach",
    "go": "parent: go written",
    "job_go": "job: waiting for go",
    "seeded": "harness: seed",
    "cases": "harness: setup, make_cases",
    "snapshot": "harness: snapshot",
    "ran": "harness: load code, cases, probes",
    "written": "harness: frame written",
    "channels": "job exit: channels closed",
    "reaped": "job exit -> reaped",
    "status": "status to the parent",
    "answer": "parent: supervisor done",
    "judged": "parent: decode, compare",
    "end": "parent: result",
}


def _noop(name: str) -> None:
    pass


NOOP: Callable[[str], None] = _noop


class JobPage:
    """The shared page a traced job writes its stamps into."""

    def __init__(self) -> None:
        self.page = mmap.mmap(-1, 8 * len(JOB_STAMPS))  # MAP_SHARED | MAP_ANONYMOUS: survives fork

    def stamp(self, name: str) -> None:
        try:
            struct.pack_into("<d", self.page, 8 * JOB_STAMPS.index(name), time.monotonic())
        except (ValueError, TypeError):
            pass

    def read(self) -> dict[str, float]:
        try:
            values = struct.unpack_from(f"<{len(JOB_STAMPS)}d", self.page)
        except (ValueError, TypeError):
            return {}
        return {n: v for n, v in zip(JOB_STAMPS, values, strict=True) if v > 0}

    def close(self) -> None:
        self.page.close()


def phases(stamps: dict[str, float]) -> dict[str, float]:
    """Consecutive phases of one grading in ms, each named by the stamp that ends it: the stamps
    sorted by time from `recv` to `end` (later ones, such as a reaping after the answer, are
    left out), so the phases add up to the engine's own time for the job."""
    start, end = stamps.get("recv"), stamps.get("end")
    if start is None or end is None:
        return {}
    seq = sorted((t, n) for n, t in stamps.items() if start <= t <= end and n != "recv")
    out: dict[str, float] = {}
    prev = start
    for t, name in seq:
        out[name] = out.get(name, 0.0) + (t - prev)
        prev = t
    return out
