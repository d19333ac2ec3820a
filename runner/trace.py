"""Where a grading's time goes: CLOCK_MONOTONIC stamps in the parent, the zygote's side and the
job, for `bench/runner.py` only (`trace: true` in runner.yaml, a benchmark setting).

With tracing off nothing here runs: no page is mapped and no stamp is taken. With it on, the
engine makes a one-page memfd per process and sends it to the zygote beside the job's other
fds; the zygote's side maps it before the job forks, and both write their stamps into it, which
the engine reads from its own mapping as soon as it answers (the job's exit may come later). The
job never opens anything: the mapping is inherited. CLOCK_MONOTONIC is one clock for every
process on the host (jobs get no time namespace), so stamps from all three compare directly. The
job may scribble on its page: the stamps are printed by the benchmark and never judged.

`result.timings` then carries each stamp as `t_<name>`, in ms since the engine received the job.
"""
from __future__ import annotations

import mmap
import os
import struct
import time
from collections.abc import Callable

# Stamps taken on the zygote's side of the job (the supervisor and the job), one double each.
PAGE_STAMPS = ("sup_start", "sup_ns", "job_start", "job_ns", "job_mounted", "job_payload", "job_ready", "job_go", "seeded",
               "cases", "snapshot", "ran", "written", "reaped")
PAGE_BYTES = 8 * len(PAGE_STAMPS)

# What each stamp ends: the phase from the stamp before it (in time) up to this one.
LABELS = {
    "slot": "parent: wait for a free slot",
    "submit": "parent: payload and pipes",
    "submitted": "parent: request to the zygote",
    "sup_start": "zygote: fork of the supervisor",
    "sup_ns": "supervisor: unshare, id maps, lo up",
    "job_start": "fork of the job (PID 1)",
    "job_ns": "job: id maps, lo up (cloned)",
    "job_mounted": "job: mounts",
    "job_payload": "job: payload read",
    "job_ready": "job: rlimits, caps, seccomp",
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


class Page:
    """The shared page of one traced process: made by the engine (`create`), mapped by the
    zygote's side from the fd it was sent (`attach`)."""

    def __init__(self, page: mmap.mmap, fd: int | None = None) -> None:
        self.page, self.fd = page, fd

    @classmethod
    def create(cls) -> Page:
        fd = os.memfd_create("quiz-trace", os.MFD_CLOEXEC)
        os.ftruncate(fd, PAGE_BYTES)
        return cls(mmap.mmap(fd, PAGE_BYTES), fd)

    @classmethod
    def attach(cls, fd: int) -> Page:
        try:
            return cls(mmap.mmap(fd, PAGE_BYTES))
        finally:
            os.close(fd)

    def stamp(self, name: str) -> None:
        try:
            struct.pack_into("<d", self.page, 8 * PAGE_STAMPS.index(name), time.monotonic())
        except (ValueError, TypeError):
            pass

    def read(self) -> dict[str, float]:
        try:
            values = struct.unpack_from(f"<{len(PAGE_STAMPS)}d", self.page)
        except (ValueError, TypeError):
            return {}
        return {n: v for n, v in zip(PAGE_STAMPS, values, strict=True) if v > 0}

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
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
