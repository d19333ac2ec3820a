"""What the rest of the curriculum needs from the sandbox, each shown by a real job graded by the
real runner: multi-rank gloo jobs (ranks mode), DataLoader workers, save/load of a class the
player defines, the jail's own /etc, torch.export + onnxruntime, dynamo's explain and opcheck.
Each failure mode of ranks mode has its own test, and loopback stays the job's own."""
from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlparse

import pytest

from runner.client import RunnerClient

CASES_1D = """
def make_cases():
    return [{"name": "ones", "args": (torch.ones(3),), "example": True},
            {"name": "arange", "args": (torch.arange(4.0),)},
            {"name": "random", "args": (torch.randn(5, dtype=torch.float64),)}]
"""
ALL_REDUCE = """
import torch.distributed as dist

def solve(x):
    y = x * (dist.get_rank() + 1)
    dist.all_reduce(y)
    return y
"""


def code_job(setup: str, reference: str, submission: str, **over: Any) -> dict[str, Any]:
    job: dict[str, Any] = {"kind": "code", "setup": setup, "reference": reference, "submission": submission,
                           "entrypoint": "solve", "limits": {"wall_s": 20, "cpu_s": 20}}
    job.update(over)
    return job


async def test_health_reports_ranks_and_features(runner_client: RunnerClient) -> None:
    health = await runner_client.health()
    caps = health["capabilities"]
    assert caps["ranks"] >= 2
    assert "onnx" in caps["features"]  # the runner extra installs onnx, onnxscript, onnxruntime


# ------------------------------------------------------------------ ranks mode

async def test_two_rank_all_reduce_is_graded_rank_by_rank(runner_client: RunnerClient) -> None:
    summed = ALL_REDUCE.replace("dist.all_reduce(y)", "dist.all_reduce(y, op=dist.ReduceOp.SUM)")
    right = await runner_client.grade(code_job(CASES_1D, ALL_REDUCE, summed, ranks=2))
    assert right["verdict"] == "passed", right
    # forgetting the collective: each rank keeps its own value, rank 0 and rank 1 both differ
    local = await runner_client.grade(code_job(CASES_1D, ALL_REDUCE, ALL_REDUCE.replace("    dist.all_reduce(y)\n", ""), ranks=2))
    assert local["verdict"] == "failed" and local["passed_cases"] == 0
    assert local["cases"][1]["message"].startswith("rank 0['result']: ")


DDP_SETUP = """
def make_cases():
    cases = []
    for n, (fan_in, fan_out) in enumerate([(3, 2), (5, 4), (8, 1)]):
        torch.manual_seed(n)
        cases.append({"name": f"Linear({fan_in}, {fan_out})", "example": n == 0,
                      "args": (nn.Linear(fan_in, fan_out).double(), torch.randn(8, fan_in, dtype=torch.float64),
                               torch.randn(8, fan_out, dtype=torch.float64))})
    return cases
"""
# the single-process step on the whole batch, which every rank computes alone
SINGLE_STEP = """
def solve(model, x, y):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    F.mse_loss(model(x), y).backward()
    opt.step()
    return [p.detach().clone() for p in model.parameters()]
"""
DDP_STEP = """
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

def solve(model, x, y):
    rank, world = dist.get_rank(), dist.get_world_size()
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    shard = slice(rank * len(x) // world, (rank + 1) * len(x) // world)
    F.mse_loss(ddp(x[shard]), y[shard]).backward()   # DDP averages the gradients over ranks
    opt.step()
    return [p.detach().clone() for p in model.parameters()]
"""


async def test_two_rank_ddp_step_equals_the_single_process_step(runner_client: RunnerClient) -> None:
    result = await runner_client.grade(code_job(DDP_SETUP, SINGLE_STEP, DDP_STEP, ranks=2))
    assert result["verdict"] == "passed", result
    # each rank stepping on its own half without DDP: the ranks disagree with the whole batch
    alone = DDP_STEP.replace("ddp = DDP(model)", "ddp = model")
    result = await runner_client.grade(code_job(DDP_SETUP, SINGLE_STEP, alone, ranks=2))
    assert result["verdict"] == "failed" and result["passed_cases"] == 0


async def test_a_rank_that_raises_names_itself(runner_client: RunnerClient) -> None:
    raising = ALL_REDUCE.replace("    return y", "    if dist.get_rank() == 1:\n        raise ValueError('rank one gave up')\n    return y")
    result = await runner_client.grade(code_job(CASES_1D, ALL_REDUCE, raising, ranks=2))
    assert result["verdict"] == "error"
    assert result["error"]["message"] == "rank 1: rank one gave up"


async def test_a_rank_that_dies_fails_its_case_and_the_rest(runner_client: RunnerClient) -> None:
    dying = ALL_REDUCE.replace("    return y", "    import os\n    if dist.get_rank() == 1 and x.numel() == 4:\n        os._exit(9)\n    return y")
    result = await runner_client.grade(code_job(CASES_1D, ALL_REDUCE, dying, ranks=2))
    assert result["verdict"] == "error", result
    assert [c["passed"] for c in result["cases"]] == [True, False, False]  # the first case still counts
    assert result["cases"][1]["message"] == "raised RankDied: rank 1 exited with code 9 while running this case"
    assert result["cases"][2]["message"].endswith("rank 1 exited with code 9 while running case 2, so this case did not run")


async def test_a_rank_that_hangs_times_out_naming_the_case(runner_client: RunnerClient) -> None:
    hanging = ALL_REDUCE.replace(
        "    return y", "    if dist.get_rank() == 1 and x.numel() == 4:\n        while True:\n            pass\n    return y")
    result = await runner_client.grade(code_job(CASES_1D, ALL_REDUCE, hanging, ranks=2, limits={"wall_s": 4, "cpu_s": 20}))
    assert result["verdict"] == "timeout", result
    assert "it was running case 2 of 3 (arange)" in result["message"]
    again = await runner_client.grade(code_job(CASES_1D, ALL_REDUCE, ALL_REDUCE, ranks=2))
    assert again["verdict"] == "passed"


async def test_more_ranks_than_the_runner_allows_is_unsupported(runner_client: RunnerClient) -> None:
    health = await runner_client.health()
    result = await runner_client.grade(code_job(CASES_1D, ALL_REDUCE, ALL_REDUCE, ranks=health["capabilities"]["ranks"] + 1))
    assert result["verdict"] == "unsupported"
    assert result["message"].startswith(f"this runner runs at most {health['capabilities']['ranks']} ranks")


async def test_four_ranks_fit_the_default_limits(runner_client: RunnerClient) -> None:
    gather = """
import torch.distributed as dist

def solve(x):
    parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, x + dist.get_rank())
    return torch.stack(parts)
"""
    result = await runner_client.grade(code_job(CASES_1D, gather, gather.replace("torch.stack(parts)", "torch.stack(parts, 0)"), ranks=4))
    assert result["verdict"] == "passed", result


# ------------------------------------------------------------------ loopback is the job's own

async def test_a_job_reaches_only_its_own_loopback(runner_client: RunnerClient) -> None:
    """With lo up, 127.0.0.1 is the job's namespace: the runner's port is not there, and a server
    one job opens is not visible to another job running at the same time."""
    port = urlparse(runner_client.url).port
    probe_runner = f"""
import socket

def solve(x):
    s = socket.socket()
    s.settimeout(1)
    try:
        s.connect(("127.0.0.1", {port}))
        return x * 0   # reached the runner: wrong on purpose
    except OSError:
        return x + 1
    finally:
        s.close()
"""
    listener = """
import socket, time

def solve(x):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 45678))
    s.listen(1)
    time.sleep(1.5)
    s.close()
    return x + 1
"""
    dialer = """
import socket, time

def solve(x):
    time.sleep(0.5)
    s = socket.socket()
    s.settimeout(1)
    try:
        s.connect(("127.0.0.1", 45678))
        return x * 0   # reached the other job
    except OSError:
        return x + 1
    finally:
        s.close()
"""
    one_case = "def make_cases():\n    return [{'args': (torch.ones(2),), 'example': True}]\n"
    reference = "def solve(x):\n    return x + 1\n"
    first = await runner_client.grade(code_job(one_case, reference, probe_runner))
    assert first["verdict"] == "passed", first
    listening, dialing = await asyncio.gather(
        runner_client.grade(code_job(one_case, reference, listener)),
        runner_client.grade(code_job(one_case, reference, dialer)))
    assert listening["verdict"] == "passed" and dialing["verdict"] == "passed", (listening, dialing)


# ------------------------------------------------------------------ data loading, pickling, /etc

DATA_SETUP = """
def make_cases():
    return [{"name": "40 rows", "args": (torch.arange(80.0).reshape(40, 2),), "example": True},
            {"name": "13 rows, ragged last batch", "args": (torch.randn(13, 3),)}]
"""
LOADER_REF = """
def solve(data):
    return [data[i:i + 4].sum(0) for i in range(0, len(data), 4)]
"""
LOADER_WORKERS = """
from torch.utils.data import DataLoader, TensorDataset

def solve(data):
    loader = DataLoader(TensorDataset(data), batch_size=4, num_workers=2)
    return [batch.sum(0) for (batch,) in loader]
"""


async def test_a_dataloader_with_two_workers(runner_client: RunnerClient) -> None:
    result = await runner_client.grade(code_job(DATA_SETUP, LOADER_REF, LOADER_WORKERS))
    assert result["verdict"] == "passed", result


async def test_a_worker_hands_back_a_batch_larger_than_the_file_size_limit(runner_client: RunnerClient) -> None:
    """Batches cross from workers through /dev/shm, sized on its own (`shm_mb`), not by `file_size_mb`."""
    setup = "def make_cases():\n    return [{'args': (3,), 'example': True}]\n"
    reference = "def solve(n):\n    return [torch.full((3,), float(i * 5 * 1024 * 1024)) for i in range(n)]\n"
    big = """
from torch.utils.data import DataLoader, Dataset

class Big(Dataset):
    def __len__(self):
        return 3
    def __getitem__(self, i):
        return torch.full((5 * 1024 * 1024,), float(i))   # 20 MiB per sample

def solve(n):
    return [sample.sum().expand(3).clone() for sample in DataLoader(Big(), batch_size=None, num_workers=2)]
"""
    result = await runner_client.grade(code_job(setup, reference, big, limits={"wall_s": 20, "cpu_s": 20, "file_size_mb": 8}))
    assert result["verdict"] == "passed", result


async def test_torch_save_and_load_of_a_class_the_player_defines(runner_client: RunnerClient) -> None:
    setup = "def make_cases():\n    return [{'args': (torch.randn(2, 3),), 'example': True}, {'args': (torch.randn(5, 3),)}]\n"
    reference = "def solve(x):\n    return x * 2 + 1\n"
    saved = """
import io

class Affine(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(2.0))
        self.shift = 1.0

    def forward(self, x):
        return x * self.scale + self.shift

def solve(x):
    buf = io.BytesIO()
    torch.save(Affine(), buf)             # pickles the class by its module and name
    buf.seek(0)
    model = torch.load(buf, weights_only=False)
    path = "model.pt"                     # and through a file in the job's scratch directory
    torch.save(model, path)
    return torch.load(path, weights_only=False)(x).detach()
"""
    result = await runner_client.grade(code_job(setup, reference, saved))
    assert result["verdict"] == "passed", result


async def test_the_jail_has_its_own_readable_etc(runner_client: RunnerClient) -> None:
    setup = "def make_cases():\n    return [{'args': (), 'example': True}]\n"
    reference = "def solve():\n    return ['root', '127.0.0.1', True]\n"
    looks = """
import getpass, os, socket

def solve():
    with open("/etc/hosts") as f:
        hosts = f.read()
    return [getpass.getuser(), socket.gethostbyname(socket.gethostname()),
            os.access("/etc/ld.so.cache", os.R_OK) and "sandbox" in hosts and "quiz" not in open("/etc/passwd").read()]
"""
    result = await runner_client.grade(code_job(setup, reference, looks))
    assert result["verdict"] == "passed", result


# ------------------------------------------------------------------ export, ONNX, dynamo, opcheck

EXPORT_SETUP = """
def make_cases():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 2)).eval()
    return [{"name": "batch of 3", "args": (model, torch.randn(3, 4)), "example": True},
            {"name": "batch of 5", "args": (model, torch.randn(5, 4))}]
"""
EXPORT_REF = """
def solve(model, x):
    with torch.no_grad():
        return model(x)
"""
ONNX_ROUND_TRIP = """
import onnxruntime as ort

def solve(model, x):
    program = torch.onnx.export(model, (x,), dynamo=True)
    program.save("model.onnx")
    session = ort.InferenceSession("model.onnx", providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    return torch.from_numpy(session.run(None, {name: x.numpy()})[0])
"""


async def test_torch_onnx_export_checked_in_onnxruntime(runner_client: RunnerClient) -> None:
    # one case: an export takes seconds
    one_case = EXPORT_SETUP.replace('            {"name": "batch of 5", "args": (model, torch.randn(5, 4))}]', "            ]")
    result = await runner_client.grade(code_job(one_case, EXPORT_REF, ONNX_ROUND_TRIP, requires=["cpu", "onnx"],
                                                tolerances={"rtol": 1e-4, "atol": 1e-5},
                                                limits={"wall_s": 30, "cpu_s": 30}))
    assert result["verdict"] == "passed", result


async def test_torch_export_runs_the_exported_program(runner_client: RunnerClient) -> None:
    exported = """
def solve(model, x):
    program = torch.export.export(model, (x,))
    return program.module()(x).detach()
"""
    result = await runner_client.grade(code_job(EXPORT_SETUP, EXPORT_REF, exported))
    assert result["verdict"] == "passed", result


async def test_dynamo_explain_reports_graph_breaks(runner_client: RunnerClient) -> None:
    setup = "def make_cases():\n    return [{'args': (torch.randn(4),), 'example': True}]\n"
    reference = "def solve(x):\n    return 1\n"   # one break: the print
    explained = """
import torch._dynamo

def f(x):
    x = x.sin()
    print("graph break here")
    return x.cos()

def solve(x):
    return torch._dynamo.explain(f)(x).graph_break_count
"""
    result = await runner_client.grade(code_job(setup, reference, explained))
    assert result["verdict"] == "passed", result


OPCHECK_SETUP = "def make_cases():\n    return [{'args': (torch.randn(3, 4),), 'example': True}, {'args': (torch.randn(2, 5),)}]\n"
OPCHECK_REF = "def solve(x):\n    return x.sum(-1)\n"
CUSTOM_OP = """
@torch.library.custom_op("quiz::rowsum", mutates_args=())
def rowsum(x: torch.Tensor) -> torch.Tensor:
    return x.sum(-1)

@rowsum.register_fake
def _(x):
    return x.new_empty(x.shape[:-1])

def solve(x):
    torch.library.opcheck(rowsum, (x,))   # raises when the fake disagrees with the kernel
    return rowsum(x)
"""


async def test_opcheck_catches_a_wrong_fake(runner_client: RunnerClient) -> None:
    result = await runner_client.grade(code_job(OPCHECK_SETUP, OPCHECK_REF, CUSTOM_OP))
    assert result["verdict"] == "passed", result
    wrong_fake = CUSTOM_OP.replace("x.new_empty(x.shape[:-1])", "x.new_empty(x.shape)")
    result = await runner_client.grade(code_job(OPCHECK_SETUP, OPCHECK_REF, wrong_fake))
    assert result["verdict"] == "error"
    assert "opcheck" in result["error"]["message"] or "fake" in result["error"]["message"].lower(), result["error"]


@pytest.mark.parametrize("requires", [["cpu", "inductor"]])
async def test_a_feature_the_runner_lacks_is_unsupported(runner_client: RunnerClient, requires: list[str]) -> None:
    """The test runner is started without `inductor: true`: such a job is routed elsewhere, never graded here."""
    result = await runner_client.grade(code_job(OPCHECK_SETUP, OPCHECK_REF, OPCHECK_REF, requires=requires))
    assert result["verdict"] == "unsupported"
    assert result["message"] == "this runner lacks inductor"
