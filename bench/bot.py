"""Benchmark of the bot side: answer ingestion through the core, and leaderboard queries at
10k, 100k and 1M stored answers. Prints figures; the last line is
`bot: ingest_per_s=... leaderboard_ms_at_1M=...`.

Ingestion: answers go through QuizService.submit and the grading worker into a real SQLite
file; the runner client answers instantly from recorded verdicts, so the figure measures the
bot (storage, scoring, result messages), not the sandbox.

Leaderboards: synthetic rounds, answers and score rows are bulk-inserted into a real SQLite
file (one channel: the worst case, since every query hits the same channel), then every
leaderboard period and a player card are timed through the core.

Burst latency (`--burst`, on by default): the real sandboxed runner (the embedded one) and a
real SQLite file, the service's own background loops and a system clock; 500 answers from 100
players arrive at once (half correct, half wrong), then the same with 10 never-ending answers
among them. For each answer: the time from its submission to its result reaching the platform
(the sink), as p50/p95/max, and when the last result arrived. A result must not wait for a
stranger's slow answer.

    python bench/bot.py [--answers 3000] [--sizes 10000,100000,1000000] [--burst 500] [--hung 10]
"""
from __future__ import annotations

import argparse
import asyncio
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.core import Actor, ChannelRef, CoreSettings, FakeClock, RoleRules, RunnerPool  # noqa: E402
from bot.core.leaderboards import leaderboard, player_card  # noqa: E402
from bot.core.service import QuizService  # noqa: E402
from bot.storage import open_database  # noqa: E402
from questionbank.model import Item, Text  # noqa: E402

WHERE = ChannelRef("bench", "ws", "C1", "bench")
NOW = datetime(2025, 6, 18, 12, 0, tzinfo=UTC)  # a Wednesday


class RecordedRunner:
    """Answers from recorded verdicts (what the real runner returned for these submissions)."""

    VERDICTS = [
        {"verdict": "passed", "passed_cases": 3, "total_cases": 3, "score": 1.0, "message": "3 of 3 cases passed",
         "cases": [{"index": i, "name": f"case {i}", "example": i == 0, "passed": True, "message": ""}
                   for i in range(3)]},
        {"verdict": "failed", "passed_cases": 1, "total_cases": 3, "score": 0.33, "message": "1 of 3 cases passed",
         "cases": [{"index": 0, "name": "small", "example": True, "passed": True, "message": ""},
                   {"index": 1, "name": "case 2", "example": False, "passed": False,
                    "message": "result: shape differs"}]},
        {"verdict": "error", "passed_cases": 0, "total_cases": 3, "message": "TypeError",
         "error": {"type": "TypeError", "message": "bad operand", "traceback": "line 2, in solve"}},
    ]

    def __init__(self) -> None:
        self.calls = 0

    async def health(self) -> dict:
        return {"cuda": None}

    async def grade(self, job: dict) -> dict:
        self.calls += 1
        return dict(self.VERDICTS[hash(job["submission"]) % 3], job_id=job.get("job_id"))


def item(i: int) -> Item:
    t = Text(zh=f"题 {i}", en=f"Item {i}")
    return Item(id=f"bench-{i}", kind="code", outline=(f"{1 + i % 10}.1.1.1",), difficulty=1 + i % 5, tags=(),
                requires="cpu", title=t, prompt=t, explanation=t, entrypoint="solve",
                starter="def solve(x):\n    ...\n", setup="def make_cases():\n    return []\n",
                reference="def solve(x):\n    return x\n")


class Bank:
    def __init__(self, n: int) -> None:
        self.items = {f"bench-{i}": item(i) for i in range(n)}


async def bench_ingest(tmp: Path, n_answers: int, players: int = 300) -> float:
    runner = RecordedRunner()
    clock = FakeClock(NOW)
    settings = CoreSettings(roles=RoleRules(moderators=frozenset({"mod"})))
    svc = await QuizService.open(str(tmp / "ingest.sqlite3"), Bank(20), RunnerPool.single(runner), clock=clock,
                                 settings=settings)
    delivered = 0

    async def sink(ref, msg):  # noqa: ANN001, ANN202 - a platform that posts instantly
        nonlocal delivered
        delivered += 1
        return None

    svc.sink = sink
    await svc.start(background=False)
    await svc.command(Actor("bench", "mod", "mod"), WHERE, "enable")
    await svc.command(Actor("bench", "mod", "mod"), WHERE, "post")
    await svc.deliver()
    actors = [Actor("bench", f"u{i}", f"user{i}") for i in range(players)]
    codes = [f"def solve(x):\n    return x + {i}\n" for i in range(50)]
    rng = random.Random(1)
    t0 = time.perf_counter()
    batch = 100
    for start in range(0, n_answers, batch):
        subs = [svc.submit(rng.choice(actors), WHERE, f"```python\n{rng.choice(codes)}```")
                for _ in range(min(batch, n_answers - start))]
        acks = await asyncio.gather(*subs)
        assert all(a[0].kind == "ack" for a in acks), acks[0][0].text
        await svc.grade_pending()
        await svc.deliver()
    await svc.settle()
    elapsed = time.perf_counter() - t0
    graded = (await svc.db.fetchone("SELECT COUNT(*) FROM answers WHERE state = 'graded'"))[0]
    scored = (await svc.db.fetchone("SELECT COUNT(*) FROM scores"))[0]
    assert graded == scored == n_answers, (graded, scored)
    await svc.close()
    rate = n_answers / elapsed
    print(f"ingest: {n_answers} answers from {players} players submitted, graded, scored and delivered "
          f"in {elapsed:.2f} s = {rate:.0f} answers/s ({delivered} messages)")
    return rate


def bulk_fill(path: Path, upto: int, state: dict, players: int = 300) -> None:
    """Add synthetic rounds, answers and score rows until the file holds `upto` answers.
    One round per day going back from NOW, ~1.5 attempts per player per round."""
    con = sqlite3.connect(path)
    con.execute("PRAGMA synchronous=OFF")
    con.execute("PRAGMA foreign_keys=OFF")
    rng = state.setdefault("rng", random.Random(3))
    cur = con.cursor()
    per_round = int(players * 1.5)
    with con:
        while state["answers"] < upto:
            day = NOW.date() - timedelta(days=state["rounds"])
            opened = datetime.combine(day, datetime.min.time(), tzinfo=UTC) + timedelta(hours=9)
            chapter = 1 + state["rounds"] % 10
            cur.execute("INSERT INTO rounds (channel_id, item_id, local_date, scheduled, status, opened_at, closes_at,"
                        " closed_at, kind, difficulty, chapter) VALUES (1, ?, ?, 1, 'closed', ?, ?, ?, 'code', ?, ?)",
                        (f"bench-{state['rounds'] % 20}", day.isoformat(), opened.isoformat(),
                         (opened + timedelta(hours=8)).isoformat(), (opened + timedelta(hours=8)).isoformat(),
                         1 + state["rounds"] % 5, chapter))
            rid = cur.lastrowid
            n = min(per_round, upto - state["answers"])
            answers, scores = [], []
            aid = state["next_answer"]
            for k in range(n):
                pid = 1 + rng.randrange(players)
                verdict = "passed" if rng.random() < 0.6 else "failed"
                frac = 1.0 if verdict == "passed" else 0.33
                ts = (opened + timedelta(seconds=k * 20)).isoformat()
                answers.append((aid, rid, 1, pid, "def solve(x):\n    return x\n", ts, "graded", ts, verdict, frac))
                pts = round(30 * frac, 2)
                scores.append((aid, rid, 1, pid, day.isoformat(), chapter, pts, pts, 0, 0,
                               int(verdict == "passed"), 1, ts))
                aid += 1
            cur.executemany("INSERT INTO answers (id, round_id, channel_id, player_id, content, submitted_at, state,"
                            " next_try_at, verdict, fraction) VALUES (?,?,?,?,?,?,?,?,?,?)", answers)
            cur.executemany("INSERT INTO scores (answer_id, round_id, channel_id, player_id, local_date, chapter,"
                            " attempt_value, points, first_bonus, streak_bonus, solved, streak, scored_at)"
                            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", scores)
            state["next_answer"] = aid
            state["answers"] += n
            state["rounds"] += 1
    con.execute("ANALYZE")
    con.close()


async def time_boards(path: Path, repeat: int = 5) -> dict[str, float]:
    db = await open_database(path)
    from bot.storage.repos import Store

    store = Store(db)
    ch = await store.channels.get(1)
    assert ch is not None
    async with db.transaction():  # a topic week covering this week, so "topic" has data
        if not await store.weeks.active(ch.id, NOW.date()):
            await store.weeks.add(ch.id, "3", "bench", NOW.date() - timedelta(days=2), NOW.date() + timedelta(days=4),
                                  "bench")
    out: dict[str, float] = {}
    for period in ("round", "week", "topic", "month", "all"):
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            board = await leaderboard(store, ch, period, NOW, limit=10)
            times.append((time.perf_counter() - t0) * 1000)
            assert board.rows or period == "round"
        out[period] = statistics.median(times)
    times = []
    for i in range(repeat):
        t0 = time.perf_counter()
        await player_card(store, ch, 1 + i, NOW)
        times.append((time.perf_counter() - t0) * 1000)
    out["me"] = statistics.median(times)
    await db.close()
    return out


BURST_ITEM = "nchw-to-nhwc-view"
BURST_CODES = ["def nchw_to_nhwc(x):\n    return x.permute(0, 2, 3, 1)  # {i}\n",
               "def nchw_to_nhwc(x):\n    return x.permute(0, 2, 3, 1).contiguous()  # {i}\n"]
BURST_HUNG = "def nchw_to_nhwc(x):\n    while True:  # {i}\n        pass\n"


async def bench_burst(tmp: Path, client: object, n_answers: int, *, players: int = 100, hung: int = 0,
                      name: str = "burst") -> dict[str, float]:
    """Submit `n_answers` at once (`hung` of them never finish) against the real runner; latency
    from each submission to its result at the sink."""
    from bot.config import Config
    from bot.core import SystemClock
    from bot.core.runners import RunnerSlot
    from questionbank.loader import load_bank

    bank = load_bank(Config().bank_root)
    settings = CoreSettings(roles=RoleRules(moderators=frozenset({"mod"})))
    runner_done: dict[str, float] = {}
    run_ms: list[float] = []

    class Timed:  # when the runner returned each answer's verdict
        async def grade(self, job: dict) -> dict:
            result = await client.grade(job)  # type: ignore[attr-defined]
            runner_done[str(job.get("job_id"))] = time.perf_counter()
            run_ms.append(float((result.get("timings") or {}).get("run_ms") or 0))
            return result

        async def health(self) -> dict:
            return await client.health()  # type: ignore[attr-defined]

    svc = await QuizService.open(str(tmp / f"{name}.sqlite3"), bank, RunnerPool([RunnerSlot("local", Timed())]),
                                 clock=SystemClock(), settings=settings)
    delivered: dict[int, float] = {}
    done = asyncio.Event()
    expected = 0

    async def sink(ref, msg):  # noqa: ANN001, ANN202 - a platform that posts instantly
        if msg.kind == "result" and msg.data.get("answer_id") is not None:
            delivered.setdefault(int(msg.data["answer_id"]), time.perf_counter())
            if len(delivered) >= expected > 0:
                done.set()
        return "thread" if msg.kind == "round_open" else None

    svc.sink = sink
    await svc.start(background=True)
    try:
        mod = Actor("bench", "mod", "mod")
        await svc.command(mod, WHERE, "enable")
        await svc.command(mod, WHERE, f"post {BURST_ITEM}")
        actors = [Actor("bench", f"p{i}", f"player{i}") for i in range(players)]
        texts = [f"```python\n{BURST_CODES[i % 2].format(i=i)}```" for i in range(n_answers)]
        for k in range(hung):  # spread through the burst
            texts[(k * n_answers) // max(1, hung)] = f"```python\n{BURST_HUNG.format(i=k)}```"
        hung_idx = {(k * n_answers) // max(1, hung) for k in range(hung)}
        expected = n_answers
        t0 = time.perf_counter()
        submitted: dict[int, float] = {}
        hung_ids: set[int] = set()
        for i, text in enumerate(texts):
            acks = await svc.submit(actors[i % players], WHERE, text)
            assert acks[0].kind == "ack", acks[0].text
            aid = int(acks[0].data["answer_id"])
            submitted[aid] = time.perf_counter()
            if i in hung_idx:
                hung_ids.add(aid)
        stored = time.perf_counter() - t0
        await asyncio.wait_for(done.wait(), timeout=900)
        total = time.perf_counter() - t0
    finally:
        await svc.close()
    lat = sorted(delivered[a] - submitted[a] for a in submitted if a not in hung_ids)
    q = statistics.quantiles(lat, n=100)
    # how long a verdict the runner had returned waited before it reached the player
    held = sorted(delivered[a] - runner_done[f"answer-{a}"] for a in submitted
                  if a not in hung_ids and f"answer-{a}" in runner_done)
    hq = statistics.quantiles(held, n=100)
    out = {"p50": q[49], "p95": q[94], "max": lat[-1], "stored": stored, "all": total,
           "held_p50": hq[49], "held_p95": hq[94], "held_max": held[-1]}
    print(f"{name}: {n_answers} answers from {players} players ({hung} never-ending) against the real runner: "
          f"stored in {stored:.2f} s, all results delivered after {total:.1f} s; latency answer -> result "
          f"(the {len(lat)} finishing answers) p50={out['p50']:.2f}s p95={out['p95']:.2f}s max={out['max']:.2f}s; "
          f"runner verdict -> result p50={out['held_p50']:.3f}s p95={out['held_p95']:.3f}s "
          f"max={out['held_max']:.2f}s; runner run time per answer p50={statistics.median(run_ms or [0]):.0f}ms")
    return out


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--answers", type=int, default=3000)
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--burst", type=int, default=500, help="answers in the burst against the real runner (0: skip)")
    ap.add_argument("--hung", type=int, default=10, help="never-ending answers in the second burst")
    ap.add_argument("--only-burst", action="store_true", help="skip ingestion and leaderboards")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-bot-") as d:
        tmp = Path(d)
        burst = ""
        if args.burst:
            from runner.embedded import EmbeddedRunner

            with EmbeddedRunner() as client:
                b0 = await bench_burst(tmp, client, args.burst, name="burst")
                b1 = await bench_burst(tmp, client, args.burst, hung=args.hung, name="burst_hung")
            burst = (f" burst_p50_s={b0['p50']:.2f} burst_p95_s={b0['p95']:.2f} hung_p50_s={b1['p50']:.2f}"
                     f" hung_p95_s={b1['p95']:.2f} held_p95_s={max(b0['held_p95'], b1['held_p95']):.3f}")
            if args.only_burst:
                print(f"bot:{burst}")
                return
        rate = await bench_ingest(tmp, args.answers)
        path = tmp / "boards.sqlite3"
        db = await open_database(path)  # schema via the real migrations
        async with db.transaction():
            await db.conn.execute(
                "INSERT INTO channels (platform, workspace, channel, name, created_at) VALUES"
                " ('bench', 'ws', 'C1', 'bench', ?)", (NOW.isoformat(),))
            await db.conn.executemany("INSERT INTO players (platform, user_id, name) VALUES ('bench', ?, ?)",
                                      [(f"u{i}", f"user{i}") for i in range(300)])
        await db.close()
        state = {"answers": 0, "rounds": 0, "next_answer": 1}
        worst = 0.0
        for size in [int(s) for s in args.sizes.split(",")]:
            t0 = time.perf_counter()
            bulk_fill(path, size, state)
            fill = time.perf_counter() - t0
            times = await time_boards(path)
            worst = max(times.values())
            print(f"leaderboards at {size:>9,} answers ({state['rounds']} rounds, filled in {fill:.1f} s): "
                  + "  ".join(f"{k}={v:.1f}ms" for k, v in times.items()))
        print(f"bot: ingest_per_s={rate:.0f} leaderboard_ms_at_1M={worst:.1f}{burst}")


if __name__ == "__main__":
    asyncio.run(main())
