"""Turn bank items into runner jobs (the JSON documented in runner/README.md).

One place builds jobs so the checker, `python -m questionbank job` and the bot send the
runner exactly the same thing for the same item.
"""
from __future__ import annotations

from typing import Any

from .model import Item


def _base(item: Item, kind: str, job_id: str) -> dict[str, Any]:
    """What every job of an item carries: kind, id, device, seed and the item's limits."""
    if item.kind != kind:
        raise ValueError(f"{item.id} is a {item.kind} item, not a {kind} item")
    job: dict[str, Any] = {"kind": kind, "job_id": job_id or item.id, "requires": item.requires, "seed": 0}
    if item.limits:
        job["limits"] = dict(item.limits)
    return job


def code_job(item: Item, submission: str | None = None, *, job_id: str = "") -> dict[str, Any]:
    """A grading job for a `code` item; with no submission the reference grades itself."""
    job = _base(item, "code", job_id)
    job.update(setup=item.setup, reference=item.reference, entrypoint=item.entrypoint,
               submission=item.reference if submission is None else submission)
    if item.probe:
        job["probe"] = item.probe
    if item.tolerances:
        job["tolerances"] = dict(item.tolerances)
    return job


def output_job(item: Item, *, job_id: str = "") -> dict[str, Any]:
    """A job that runs an `output` item's snippet so its expected stdout comes from real torch."""
    job = _base(item, "output", job_id)
    job["snippet"] = item.snippet
    return job


def normalise_output(text: str) -> str:
    """Compare printed output the way a reader would: line by line, ignoring runs of blanks."""
    lines = [" ".join(line.split()) for line in text.strip().splitlines()]
    return "\n".join(line for line in lines if line)
