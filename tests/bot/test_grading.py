"""The grading pipeline: racing answers, order independence, restarts, a runner that is down,
`internal` verdicts, output and choice items."""
from __future__ import annotations

import asyncio
import random
from datetime import timedelta

from bot.core.models import Actor, ChannelRef, Message
from bot.core.scoring import Attempt, ScoringRules, score_round

from .conftest import ALICE, BOB, CAROL, FAIL, HALF, INTERNAL, MOD, PASS, WHERE
from .helpers import FakeRunner, MiniBank, choice_item, code_item, output_item, verdict_for

PLAYERS = [Actor("test", f"p{i}", f"P{i}") for i in range(6)]


async def stored_scores(h) -> dict[int, tuple]:
    rows = await h.svc.db.fetchall("SELECT answer_id, attempt_value, points, first_bonus, streak_bonus, solved,"
                                   " streak FROM scores ORDER BY answer_id")
    return {r[0]: tuple(r[1:]) for r in rows}


async def grade_in_order(h, order: list[int]) -> None:
    """Grade queued answers one by one in the given order (as if the runner finished them so)."""
    async with h.svc.db.transaction():
        await h.svc.store.answers.claim(order)
    for aid in order:
        await h.svc.grader.grade_one(aid)


async def test_results_do_not_depend_on_grading_order(make):
    """Same attempts, three grading orders, across two rounds (so streaks carry): identical rows."""
    rng = random.Random(7)
    scripts = [(p, rng.choice([PASS, FAIL, HALF])) for _ in range(4) for p in PLAYERS]
    outcomes = []
    for n, seed in enumerate((None, 1, 2)):
        h = await make(f"run{n}", bank=MiniBank.of(code_item("a", difficulty=3), code_item("b", difficulty=3)))
        await h.cmd(MOD, "enable")
        ids = []
        for day in range(2):
            await h.cmd(MOD, f"post {'ab'[day]}")
            for actor, code in scripts:
                ack = await h.answer(actor, code)
                ids.append(ack[0].data["answer_id"])
        order = list(ids)
        if seed is not None:
            random.Random(seed).shuffle(order)
        await grade_in_order(h, order)
        outcomes.append(await stored_scores(h))
        board = await h.board("all")
        outcomes[-1]["board"] = board  # type: ignore[index]
    assert outcomes[0] == outcomes[1] == outcomes[2]
    # and the first round matches the pure reference computation
    h = make.made[0]
    rows = await h.svc.db.fetchall("SELECT id, player_id, verdict, fraction FROM answers WHERE round_id = 1")
    ref = score_round([Attempt(r[0], r[1], r[2], r[3]) for r in rows], base=30, rules=ScoringRules())
    for aid, s in ref.items():
        assert outcomes[0][aid][:6] == (s.attempt_value, s.points, s.first_bonus, s.streak_bonus, int(s.solved),
                                        s.streak)


async def test_racing_answers_are_all_scored_once(make):
    class Jittery(FakeRunner):
        async def grade(self, job):  # finishes in a random order
            await asyncio.sleep(random.random() / 200)
            return await super().grade(job)

    h = await make(runner=Jittery())
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "post c1-2")
    subs = [(p, PASS if i % 3 == 0 else FAIL) for i in range(5) for p in PLAYERS]
    acks = await asyncio.gather(*(h.answer(p, code) for p, code in subs))
    assert all(a[0].kind == "ack" for a in acks)
    await asyncio.gather(h.svc.grade_pending(), h.svc.grade_pending(), h.svc.grade_pending())
    await h.svc.settle()
    n = (await h.svc.db.fetchone("SELECT COUNT(*), COUNT(DISTINCT answer_id) FROM scores"))
    assert n[0] == n[1] == len(subs)
    assert len(h.kinds("result")) == len(subs)
    assert len(h.runner.jobs) == len(subs)  # every answer sent exactly once
    solvers = await h.svc.db.fetchall("SELECT player_id, first_bonus FROM scores WHERE solved = 1 ORDER BY answer_id")
    assert [s[1] for s in solvers] == [5, 3, 1, 0, 0, 0]


async def test_restart_between_answer_and_grading(make):
    h = await make()
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "post c1-1")
    await h.answer(ALICE, PASS)
    await h.answer(BOB, FAIL)
    # the first answer was sent to the runner when the bot died; the second never left the queue
    async with h.svc.db.transaction():
        await h.svc.store.answers.claim([1])
    h2 = await h.restart()
    states = await h2.svc.db.fetchall("SELECT state FROM answers ORDER BY id")
    assert [s[0] for s in states] == ["queued", "queued"]
    await h2.svc.settle()
    assert await h2.points(ALICE) == 15 and [m.data["answer_id"] for m in h2.kinds("result")] == [1, 2]
    # a third start finds nothing to do and scores nothing twice
    h3 = await h2.restart()
    await h3.svc.settle()
    assert (await h3.svc.db.fetchone("SELECT COUNT(*) FROM scores"))[0] == 2
    assert len(h3.kinds("result")) == 2


async def test_undelivered_messages_survive_a_restart(make):
    h = await make()
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "post c1-1")
    await h.answer(ALICE, PASS)
    h.svc.sink = None  # the platform connection is down: results stay in the outbox
    await h.svc.grade_pending()
    assert not h.kinds("result")
    h2 = await h.restart()
    await h2.svc.deliver()
    assert len(h2.kinds("result")) == 1


async def test_a_channel_the_platform_refuses_does_not_hold_up_the_others(make):
    """Channel 2's posts fail for a while: channel 1's round and result still go out, and
    channel 2's messages follow later in their own order, each posted once."""
    h = await make()
    other = ChannelRef("test", "ws", "C2", "quiz-2")
    failing = {"on": False}
    posted: list[tuple[str, str, str | None]] = []

    async def sink(ref: ChannelRef, msg: Message) -> str | None:
        if failing["on"] and ref.channel == "C2":
            raise ConnectionError("platform refuses channel C2")
        posted.append((ref.channel, msg.kind, msg.thread_ref))
        return await h.sink(ref, msg)

    h.svc.sink = sink
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "enable", where=other)
    failing["on"] = True
    await h.cmd(MOD, "post c1-1", where=other)  # waits: channel 2 is unreachable
    await h.cmd(MOD, "post c1-2")
    await h.answer(ALICE, PASS)
    await h.svc.settle()
    assert [(c, k) for c, k, _ in posted if c == "C1"][-2:] == [("C1", "round_open"), ("C1", "result")]
    assert not [p for p in posted[2:] if p[0] == "C2"]
    await h.answer(BOB, PASS, where=other)
    await h.svc.settle()
    failing["on"] = False
    await h.svc.deliver()
    c2 = [(k, t) for c, k, t in posted if c == "C2"]
    assert [k for k, _ in c2][-2:] == ["round_open", "result"]
    assert c2[-1][1] == "thread-1"  # the result went into the round's thread, opened just before it
    await h.svc.deliver()
    assert len([p for p in posted if p[0] == "C2"]) == len(c2)  # nothing posted twice


async def test_runner_down_for_a_while(make):
    h = await make()
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "post c1-2")
    h.runner.down = True
    await h.answer(ALICE, PASS)
    await h.answer(BOB, HALF)
    await h.svc.settle()
    assert not h.kinds("result")
    assert await h.svc.store.answers.pending_count() == 2
    # still down after the first backoff: nothing lost, nothing scored
    h.clock.advance(timedelta(seconds=6))
    await h.svc.settle()
    await h.answer(CAROL, PASS)
    h.clock.advance(timedelta(seconds=30))
    await h.svc.settle()
    assert (await h.svc.db.fetchone("SELECT COUNT(*) FROM scores"))[0] == 0
    # back up: everything is graded once, in submission order (Alice first solver, Carol second)
    h.runner.down = False
    h.clock.advance(timedelta(minutes=10))
    await h.svc.settle()
    assert await h.svc.store.answers.pending_count() == 0
    assert [m.data["answer_id"] for m in h.kinds("result")] == [1, 2, 3]
    assert await h.board() == [(1, "Alice", 25), (2, "Carol", 23), (3, "Bob", 10)]
    # the backoff was reset once the runner answered: a new answer is graded at once
    await h.answer(BOB, PASS)
    await h.svc.settle()
    assert len(h.kinds("result")) == 4


async def test_runner_down_when_the_round_closes(make):
    h = await make()
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "post c1-1")
    h.runner.down = True
    await h.answer(ALICE, PASS)
    await h.cmd(MOD, "close")
    assert "still being graded" in h.kinds("round_close")[-1].text
    h.runner.down = False
    h.clock.advance(timedelta(minutes=10))
    await h.svc.settle()
    assert await h.points(ALICE) == 15  # graded after the close, still counted


async def test_internal_verdicts_are_retried_never_scored(make):
    flaky = {"n": 0}

    def respond(job):
        flaky["n"] += 1
        if "INTERNAL" in job["submission"] or flaky["n"] <= 2:
            return {"verdict": "internal", "message": "worker crashed"}
        return verdict_for(job["submission"])

    h = await make(runner=FakeRunner(respond=respond))
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "post c1-1")
    await h.answer(ALICE, PASS)
    for _ in range(3):
        await h.svc.settle()
        h.clock.advance(timedelta(seconds=6))
    assert await h.points(ALICE) == 15  # two internal tries, then passed
    await h.answer(BOB, INTERNAL)
    for _ in range(8):
        await h.svc.settle()
        h.clock.advance(timedelta(seconds=6))
    state = await h.svc.db.fetchone("SELECT state, tries FROM answers WHERE id = 2")
    assert state[0] == "abandoned" and state[1] == 5
    assert (await h.svc.db.fetchone("SELECT COUNT(*) FROM scores WHERE answer_id = 2"))[0] == 0
    assert "could not be graded" in h.kinds("result")[-1].title
    assert "not counted against you" in h.kinds("result")[-1].text


async def test_output_item_expected_from_runner(make):
    h = await make(bank=MiniBank.of(output_item("o1")))
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "post")
    assert h.runner.jobs[0]["kind"] == "output"
    await h.answer(ALICE, "torch.Size([2,  3])")  # whitespace is normalised
    chatter = await h.svc.message(BOB, WHERE, "what does `x.t().shape` give here?")
    assert chatter == []  # talking about code is not an attempt
    out = await h.svc.message(BOB, WHERE, "`torch.Size([3, 2])`")
    assert out and out[0].kind == "ack"
    assert await h.svc.message(CAROL, WHERE, "hmm, tricky one") == []  # chatter is not an answer
    await h.svc.settle()
    assert await h.board() == [(1, "Alice", 15), (2, "Bob", 0)]
    await h.cmd(MOD, "close")
    assert "torch.Size([2, 3])" in h.kinds("round_close")[-1].text


async def test_output_expected_computed_later_when_runner_was_down(make):
    h = await make(bank=MiniBank.of(output_item("o1")), runner=FakeRunner(down=True))
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "post")
    await h.answer(ALICE, "`torch.Size([2, 3])`")
    await h.svc.settle()
    h.runner.down = False
    h.clock.advance(timedelta(minutes=1))
    await h.svc.settle()
    assert await h.points(ALICE) == 15
    assert (await h.svc.db.fetchone("SELECT expected_output FROM rounds"))[0] == "torch.Size([2, 3])\n"


async def test_choice_items_graded_in_core(make):
    h = await make(bank=MiniBank.of(choice_item("q1", difficulty=2), choice_item("q2", correct=("A", "C"))),
                   runner=FakeRunner(down=True))
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "post q1")
    assert (await h.svc.message(ALICE, WHERE, "a"))[0].kind == "ack"
    assert (await h.svc.message(ALICE, WHERE, "(b)"))[0].kind == "ack"
    assert (await h.answer(BOB, "B"))[0].kind == "ack"
    assert (await h.answer(CAROL, "d"))[0].kind == "error"
    await h.svc.settle()
    assert not h.runner.jobs  # no runner needed
    assert await h.board() == [(1, "Alice", 23), (1, "Bob", 23)]  # 20-10%+5 vs 20+3: a tie
    await h.cmd(MOD, "post q2")
    await h.answer(CAROL, "c, a")
    await h.answer(BOB, "A")
    await h.svc.settle()
    assert await h.points(CAROL) == 15 and await h.points(BOB) == 23


async def test_unclean_text_from_a_runner_never_stops_a_batch(make):
    """A runner (of any version) that sends a lone surrogate or control characters: the answer is
    graded with the text cleaned, and the other answers of the batch are graded too."""
    def respond(job):
        if "DIRTY" in job["submission"]:
            return {"verdict": "error", "passed_cases": 0, "total_cases": 3, "message": "ValueError: \ud800\x00",
                    "cases": [{"index": 0, "name": "c\ud800", "passed": False, "message": "raised \x1b[2J"}],
                    "error": {"type": "ValueError", "message": "bad \ud800", "traceback": "  line 1"},
                    "stdout": "\ud800", "stderr": ""}
        return verdict_for(job["submission"])

    h = await make(runner=FakeRunner(respond=respond))
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "post c1-1")
    await h.answer(ALICE, PASS)
    await h.answer(BOB, "DIRTY = 1")
    await h.answer(CAROL, PASS)
    await h.svc.settle()
    states = await h.svc.db.fetchall("SELECT state, verdict, message FROM answers ORDER BY id")
    assert [(s[0], s[1]) for s in states] == [("graded", "passed"), ("graded", "error"), ("graded", "passed")]
    assert "\ud800" not in states[1][2] and "\x00" not in states[1][2]
    assert await h.points(ALICE) > 0 and await h.points(CAROL) > 0
    assert len(h.kinds("result")) == 3


async def test_an_answer_whose_grade_cannot_be_stored_is_given_up_alone(make, monkeypatch):
    """A storage fault on one answer's row (simulated) gives that answer up with a message; the
    rest of its batch is graded and scored."""
    h = await make()
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "post c1-1")
    for actor in (ALICE, BOB, CAROL):
        await h.answer(actor, PASS)
    bob_answer = 2
    original = h.svc.store.answers.finish_params

    def finish_params(answer_id, **kw):
        if answer_id == bob_answer and kw.get("state") == "graded":
            raise OSError("simulated: the row cannot be written")
        return original(answer_id, **kw)

    monkeypatch.setattr(h.svc.store.answers, "finish_params", finish_params)
    await h.svc.settle()
    states = await h.svc.db.fetchall("SELECT id, state FROM answers ORDER BY id")
    assert [tuple(s) for s in states] == [(1, "graded"), (2, "abandoned"), (3, "graded")]
    assert await h.points(ALICE) > 0 and await h.points(CAROL) > 0
    assert await h.points(BOB) == 0
    results = h.kinds("result")
    assert any("could not be stored" in m.text for m in results), [m.text for m in results]
