"""Turn bank items into runner jobs (the JSON documented in runner/README.md).

One place builds jobs so the checker, `python -m questionbank job` and the bot send the
runner exactly the same thing for the same item.
"""
from __future__ import annotations

from typing import Any

from runner.protocol import Job  # torch-free: the one definition of a job

from .model import Item


def _check_kind(item: Item, kind: str) -> None:
    if item.kind != kind:
        raise ValueError(f"{item.id} is a {item.kind} item, not a {kind} item")


def code_job(item: Item, submission: str | None = None, *, job_id: str = "") -> dict[str, Any]:
    """A grading job for a `code` item; with no submission the reference grades itself."""
    _check_kind(item, "code")
    return Job(kind="code", job_id=job_id or item.id, requires=item.requires, seed=0,
               setup=item.setup, reference=item.reference, entrypoint=item.entrypoint,
               submission=item.reference if submission is None else submission, probe=item.probe or "",
               tolerances=dict(item.tolerances or {}), limits=dict(item.limits or {})).to_json()


def output_job(item: Item, *, job_id: str = "") -> dict[str, Any]:
    """A job that runs an `output` item's snippet so its expected stdout comes from real torch."""
    _check_kind(item, "output")
    return Job(kind="output", job_id=job_id or item.id, requires=item.requires, seed=0,
               snippet=item.snippet, limits=dict(item.limits or {})).to_json()


def normalise_output(text: str) -> str:
    """Compare printed output the way a reader would: line by line, ignoring runs of blanks."""
    lines = [" ".join(line.split()) for line in text.strip().splitlines()]
    return "\n".join(line for line in lines if line)
