"""Runner settings: server maxima, per-job defaults, and where the token comes from."""
from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import yaml

LIMIT_KEYS = ("wall_s", "cpu_s", "memory_mb", "processes", "open_files", "file_size_mb",
              "output_kb", "scratch_mb", "shm_mb")


@dataclass(frozen=True)
class Limits:
    wall_s: float = 10.0
    cpu_s: float = 10.0
    memory_mb: int = 2048
    processes: int = 32
    open_files: int = 128
    file_size_mb: int = 16
    output_kb: int = 64
    scratch_mb: int = 64
    shm_mb: int = 64  # /dev/shm, where DataLoader workers put their batches

    def clamp(self, requested: dict[str, Any] | None, maxima: Limits) -> Limits:
        """Per-job limits: the request where given, never above the server's maxima."""
        values = {}
        for f in fields(self):
            v = (requested or {}).get(f.name, getattr(self, f.name))
            cap = getattr(maxima, f.name)
            values[f.name] = type(getattr(self, f.name))(max(0, min(float(v), float(cap))))
        return Limits(**values)

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class RunnerConfig:
    host: str = "127.0.0.1"
    port: int = 8700
    token_env: str = "RUNNER_TOKEN"
    max_request_kb: int = 512
    queue_size: int = 64
    workers: int = max(2, os.cpu_count() or 2)
    threads_per_job: int = 1
    allow_unsandboxed: bool = False
    gpu_memory_fraction: float = 0.25
    reference_cache: int = 256
    max_observation_mb: int = 32
    cgroups: bool = True
    cold_start: bool = False  # benchmark only: no warm zygote, a fresh interpreter per process
    trace: bool = False  # benchmark only: per-phase timestamps in `timings` (runner/trace.py)
    # job processes made ahead (namespaces, mounts, cgroups; never reused), refilled in the
    # background and let go after `pool_idle_s` without a grading; 0 turns the pool off
    pool: int = 2
    pool_idle_s: float = 120.0
    # one clone(2) from the zygote per job where it works (runner/clone.py); false: always fork
    # a supervisor that unshares and forks the job
    clone: bool = True
    defaults: Limits = field(default_factory=Limits)
    maxima: Limits = field(default_factory=lambda: Limits(
        wall_s=30, cpu_s=30, memory_mb=8192, processes=128, open_files=512,
        file_size_mb=64, output_kb=1024, scratch_mb=512, shm_mb=1024))
    # the most ranks a multi-rank (`ranks: N`) job may start; 1 turns ranks mode off
    max_ranks: int = 4
    # torch.compile's default (Inductor) backend for jobs that ask for it: needs a C++ compiler
    # in the image, and jobs that use it run with exec allowed
    inductor: bool = False

    def token(self) -> str | None:
        return os.environ.get(self.token_env) or None


class ConfigError(ValueError):
    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


_SCALARS = {"host": str, "port": int, "token_env": str, "max_request_kb": int, "queue_size": int,
            "workers": int, "threads_per_job": int, "allow_unsandboxed": bool,
            "gpu_memory_fraction": float, "reference_cache": int, "max_observation_mb": int,
            "cgroups": bool, "cold_start": bool, "trace": bool, "max_ranks": int, "inductor": bool,
            "pool": int, "pool_idle_s": float, "clone": bool}


def load_config(path: str | Path | None) -> RunnerConfig:
    """Read a runner YAML file; every problem is reported at once with its key path."""
    if path is None:
        return RunnerConfig()
    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError([f"{path}: {e}"]) from None
    if "runner" in data and isinstance(data["runner"], dict):
        data = data["runner"]
    if not isinstance(data, dict):
        raise ConfigError([f"{path}: expected a mapping of settings"])
    problems: list[str] = []
    values: dict[str, Any] = {}
    for key, value in data.items():
        if key in _SCALARS:
            tp = _SCALARS[key]
            ok = isinstance(value, tp) and not (tp is int and isinstance(value, bool))
            if tp is float and isinstance(value, int) and not isinstance(value, bool):
                ok, value = True, float(value)
            if not ok:
                problems.append(f"{key}: expected {tp.__name__}, got {value!r}")
            else:
                values[key] = value
        elif key in ("defaults", "maxima"):
            if not isinstance(value, dict):
                problems.append(f"{key}: expected a mapping of limits")
                continue
            lim: dict[str, Any] = {}
            for lk, lv in value.items():
                if lk not in LIMIT_KEYS:
                    problems.append(f"{key}.{lk}: unknown limit (known: {', '.join(LIMIT_KEYS)})")
                elif not isinstance(lv, (int, float)) or isinstance(lv, bool) or lv <= 0:
                    problems.append(f"{key}.{lk}: expected a positive number, got {lv!r}")
                else:
                    lim[lk] = lv
            base = getattr(RunnerConfig(), key)
            values[key] = replace(base, **{k: type(getattr(base, k))(v) for k, v in lim.items()})
        else:
            problems.append(f"{key}: unknown setting")
    if problems:
        raise ConfigError([f"{path}: {p}" for p in problems])
    return RunnerConfig(**values)
