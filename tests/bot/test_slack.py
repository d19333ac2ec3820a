"""The Slack adapter driven the way Slack drives it.

Requests are signed like Slack signs them (v0 HMAC of the body with the signing secret) and
posted to the adapter's real bolt app, served in HTTP mode on loopback; the app's Web API
calls go to a fake Slack (fake_slack.py) that records them. What a test asserts is what Slack
would have shown: messages, ephemeral replies, modals, reactions, the App Home, files.
"""
from __future__ import annotations

import asyncio
import itertools
import json
from datetime import timedelta
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp
import pytest
import yaml
from slack_bolt.request.async_request import AsyncBoltRequest

from bot.config import SlackConfig
from bot.core import (
    Block,
    ChannelRef,
    CoreSettings,
    FakeClock,
    Message,
    RoleRules,
    RunnerPool,
)
from bot.core.service import QuizService
from bot.platforms import slack_render as render
from bot.platforms.slack_app import NOT_PASSED, PASSED, RECEIVED, SORRY, UNGRADED_MARK, SlackAdapter

from .fake_slack import BOT_ID, BOT_USER, METHOD_SCOPES, TEAM, TOKEN, FakeSlack, signature
from .helpers import FakeRunner, MiniBank, choice_item
from .scenario import RIGHT, START, WRONG_FORM, board_of, console_scores, scenario_bank

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
CHANNEL, OTHER = "C0QUIZ", "C0OTHER"
MOD, ALICE, BOB, HANA = "U0MOD", "U0ALICE", "U0BOB", "U0HANA"
WHERE = ChannelRef("slack", TEAM, CHANNEL, "quiz")
MANIFEST = Path(__file__).resolve().parents[2] / "bot" / "platforms" / "slack_manifest.yaml"
_n = itertools.count(1)


def manifest_scopes() -> set[str]:
    return set(yaml.safe_load(MANIFEST.read_text())["oauth_config"]["scopes"]["bot"])


def slack_escape(text: str) -> str:
    """What Slack does to a message's `text` field."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def rich(prefix: str, code: str) -> list[dict[str, Any]]:
    """The rich_text blocks Slack's editor sends for a line of text and a code block."""
    elements: list[dict[str, Any]] = []
    if prefix:
        elements.append({"type": "rich_text_section", "elements": [{"type": "text", "text": prefix + "\n"}]})
    elements.append({"type": "rich_text_preformatted", "border": 0, "elements": [{"type": "text", "text": code}]})
    return [{"type": "rich_text", "block_id": "b1", "elements": elements}]


def strip_fence(block: str) -> str:
    return block.split("\n", 1)[1].rsplit("```", 1)[0]


def texts(blocks: list[dict[str, Any]]) -> str:
    """All visible text of some blocks."""
    out = []
    for b in blocks:
        if "text" in b:
            out.append(b["text"]["text"])
        for el in b.get("elements", []):
            if "text" in el:
                out.append(el["text"]["text"] if isinstance(el["text"], dict) else el["text"])
    return "\n".join(out)


def shown(params: dict[str, Any]) -> str:
    """What a chat.post* call shows: its blocks' text, or its text without blocks."""
    return texts(params["blocks"]) if params.get("blocks") else params.get("text", "")


class Slack:
    """Slack's side of the conversation: signed requests into the adapter's web app."""

    def __init__(self, svc: QuizService, fake: FakeSlack, adapter: SlackAdapter, runner: FakeRunner,
                 session: aiohttp.ClientSession) -> None:
        self.svc, self.fake, self.adapter, self.runner, self.session = svc, fake, adapter, runner, session
        self.url = f"http://127.0.0.1:{adapter.http_port}/slack/events"

    async def send(self, body: bytes, content_type: str, *, secret: str = SECRET,
                   timestamp: int | None = None, wait: bool = True) -> tuple[int, str]:
        """POST a signed request; `self.took` is how long Slack waited for the HTTP answer (the
        ack). `wait`: also wait for the handlers' follow-up calls."""
        ts = str(int(time.time()) if timestamp is None else timestamp)
        sig = signature(secret, ts, body)
        headers = {"Content-Type": content_type, "X-Slack-Request-Timestamp": ts, "X-Slack-Signature": sig}
        started = time.monotonic()
        async with self.session.post(self.url, data=body, headers=headers) as resp:
            status, text = resp.status, await resp.text()
        self.took = time.monotonic() - started
        if wait:
            await self.adapter.idle()
        return status, text

    async def slash(self, user: str, text: str, *, channel: str = CHANNEL, name: str = "quiz",
                    **kw: Any) -> tuple[int, str]:
        body = urlencode({
            "token": "legacy", "team_id": TEAM, "team_domain": "quiz", "channel_id": channel, "channel_name": name,
            "user_id": user, "user_name": user.lower(), "command": "/quiz", "text": slack_escape(text),
            "api_app_id": "A0QUIZ", "is_enterprise_install": "false", "response_url": self.fake.response_url(),
            "trigger_id": self.fake.trigger_id()}).encode()
        return await self.send(body, "application/x-www-form-urlencoded", **kw)

    async def event(self, event: dict[str, Any], **kw: Any) -> tuple[int, str]:
        body = json.dumps({
            "token": "legacy", "team_id": TEAM, "api_app_id": "A0QUIZ", "type": "event_callback", "event": event,
            "event_id": f"Ev{next(_n):06d}", "event_time": int(time.time()),
            "authorizations": [{"team_id": TEAM, "user_id": BOT_USER, "is_bot": True}]}).encode()
        return await self.send(body, "application/json", **kw)

    async def say(self, user: str, text: str, *, thread: str | None = None, channel: str = CHANNEL,
                  blocks: list[dict[str, Any]] | None = None, **extra: Any) -> str:
        """A message as Slack delivers it: `text` escaped; `blocks` as the editor made them."""
        ts = self.fake.next_ts()
        event = {"type": "message", "channel": channel, "user": user, "text": slack_escape(text), "ts": ts,
                 "team": TEAM, "channel_type": "channel", "event_ts": ts, **extra}
        if blocks is not None:
            event["blocks"] = blocks
        if thread:
            event.update(thread_ts=thread, parent_user_id=BOT_USER)
        status, _ = await self.event(event)
        assert status == 200
        return ts

    async def interact(self, payload: dict[str, Any], **kw: Any) -> tuple[int, str]:
        body = urlencode({"payload": json.dumps(payload)}).encode()
        return await self.send(body, "application/x-www-form-urlencoded", **kw)

    def _user(self, user: str) -> dict[str, Any]:
        return {"id": user, "username": user.lower(), "name": user.lower(), "team_id": TEAM}

    async def click(self, user: str, post: dict[str, Any], action_id: str,
                    state: dict[str, Any] | None = None, **kw: Any) -> tuple[int, str]:
        """Press the element `action_id` of a message the bot posted."""
        element = next(el for b in post["blocks"] if b["type"] == "actions" for el in b["elements"]
                       if el["action_id"] == action_id)
        action = {"type": element["type"], "action_id": action_id, "block_id": "quiz", "action_ts": "1.2"}
        if "value" in element:
            action["value"] = element["value"]
        return await self.interact({
            "type": "block_actions", "team": {"id": TEAM, "domain": "quiz"}, "user": self._user(user),
            "api_app_id": "A0QUIZ", "token": "legacy", "trigger_id": self.fake.trigger_id(),
            "container": {"type": "message", "message_ts": post["ts"], "channel_id": CHANNEL, "is_ephemeral": False},
            "channel": {"id": CHANNEL, "name": "quiz"}, "message": {"ts": post["ts"], "blocks": post["blocks"]},
            "state": {"values": state or {}}, "response_url": self.fake.response_url(), "actions": [action]}, **kw)

    async def submit_view(self, user: str, view: dict[str, Any], text: str | None, **kw: Any) -> tuple[int, str]:
        """Submit a modal the bot opened, with `text` typed in its input."""
        block = next(b for b in view["blocks"] if b["type"] == "input")
        state = {block["block_id"]: {block["element"]["action_id"]: {"type": "plain_text_input", "value": text}}}
        return await self.interact({
            "type": "view_submission", "team": {"id": TEAM, "domain": "quiz"}, "user": self._user(user),
            "api_app_id": "A0QUIZ", "token": "legacy", "trigger_id": self.fake.trigger_id(),
            "view": {**view, "id": "V1", "team_id": TEAM, "state": {"values": state}}}, **kw)

    async def settle(self) -> None:
        await self.svc.settle()
        await self.adapter.idle()

    def round_post(self, n: int = -1) -> dict[str, Any]:
        return [p for p in self.fake.posts(channel=CHANNEL) if p.get("blocks")
                and any(b["type"] == "actions" for b in p["blocks"])][n]

    async def count(self, table: str) -> int:
        return int((await self.svc.db.fetchone(f"SELECT COUNT(*) FROM {table}"))[0])


@pytest.fixture
async def make(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    """`slack = await make(bank=...)`: a service on a real SQLite file, the adapter in HTTP
    mode on loopback, a fake Slack; everything closed at teardown."""
    cleanups: list[Any] = []

    async def factory(bank: MiniBank | None = None) -> Slack:
        runner = FakeRunner()
        settings = CoreSettings(roles=RoleRules(moderator_roles=frozenset({"quiz-moderator"}),
                                                manager_roles=frozenset({"quiz-manager"})))
        svc = await QuizService.open(str(tmp_path / f"slack{next(_n)}.sqlite3"), bank or scenario_bank(),
                                     RunnerPool.single(runner), clock=FakeClock(START), settings=settings)
        cleanups.append(svc.close)
        await svc.start(background=False)
        fake = FakeSlack(scopes=manifest_scopes())  # a method outside the manifest's scopes fails
        fake.add_user(MOD, "Mona", admin=True, channels=(CHANNEL,))
        fake.add_user(ALICE, "Alice", channels=(CHANNEL,))
        fake.add_user(BOB, "Bob", channels=(CHANNEL,))
        fake.add_user(HANA, "Hana", groups=("quiz-moderator",), channels=(CHANNEL,))
        fake.bot_channels.add(CHANNEL)
        base_url = await fake.start()
        cleanups.append(fake.stop)
        adapter = SlackAdapter(svc, SlackConfig(enabled=True, mode="http", host="127.0.0.1", port=0),
                               bot_token=TOKEN, signing_secret=SECRET, base_url=base_url)
        await adapter.listen()
        cleanups.append(adapter.stop)
        svc.sink = adapter.sink
        session = aiohttp.ClientSession()
        cleanups.append(session.close)
        fakes.append(fake)
        return Slack(svc, fake, adapter, runner, session)

    fakes: list[FakeSlack] = []
    yield factory
    for close in reversed(cleanups):
        await close()
    for fake in fakes:  # every Web API call the adapter made is allowed by the manifest
        assert fake.scope_errors == []


@pytest.fixture
async def slack(make: Callable[..., Any]) -> Slack:
    return await make()


def assert_manifest_allows(fake: FakeSlack) -> None:
    """Every Web API method the adapter called is covered by a scope in the manifest."""
    manifest = yaml.safe_load(MANIFEST.read_text())
    scopes = set(manifest["oauth_config"]["scopes"]["bot"])
    for method in fake.methods():
        assert method in METHOD_SCOPES, f"{method}: add it to METHOD_SCOPES and the manifest"
        need = METHOD_SCOPES[method]
        assert need is None or need in scopes, f"{method} needs {need}"


# ------------------------------------------------------------------------------------ scenario

async def test_scenario_scores_like_the_console(slack: Slack, tmp_path: Path) -> None:
    """enable, post, Alice right in the thread, Bob wrong through the modal then right in the
    thread, the leaderboard: the same points as the console."""
    expected = await console_scores(tmp_path)
    status, body = await slack.slash(MOD, "enable")
    assert (status, body) == (200, "")  # acknowledged at once; the reply follows
    assert "Quiz enabled" in shown(slack.fake.posts(channel=CHANNEL)[-1])
    await slack.slash(MOD, "post c1")
    await slack.settle()
    post = slack.round_post()
    assert post["blocks"][0] == {"type": "header", "text": {"type": "plain_text", "text": "Question of the day #1",
                                                            "emoji": True}}
    assert "Write solve for c1" in shown(post)
    answer_button = post["blocks"][-1]["elements"][0]
    assert answer_button["action_id"] == render.ACTION_ANSWER and json.loads(answer_button["value"]) == {"round_id": 1}
    round_ts = post["ts"]
    assert (await slack.svc.store.rounds.get(1)).message_ref == round_ts  # the round's thread

    alice_ts = await slack.say(ALICE, "here goes\n```" + strip_fence(RIGHT) + "```", thread=round_ts,
                               blocks=rich("here goes", strip_fence(RIGHT)))
    assert slack.fake.reactions(alice_ts) == [("add", RECEIVED)]
    await slack.settle()

    await slack.slash(BOB, "answer")
    view = slack.fake.called("views.open")[-1]["view"]
    assert view["callback_id"] == render.VIEW_ANSWER
    assert next(b for b in view["blocks"] if b["type"] == "input")["element"]["initial_value"].startswith("def solve")
    status, body = await slack.submit_view(BOB, view, WRONG_FORM)
    assert status == 200 and body == ""  # the modal closes
    assert "Answer #2 received" in shown(slack.fake.ephemerals(BOB)[-1])
    await slack.settle()
    await slack.say(BOB, RIGHT, thread=round_ts)
    await slack.settle()

    await slack.slash(MOD, "leaderboard week")
    board = shown(slack.fake.posts(channel=CHANNEL)[-1])
    assert "Leaderboard" in board and board.index("Alice") < board.index("Bob")
    assert await board_of(slack.svc, WHERE) == expected

    # verdicts went into the round's thread, each pinging its player only
    results = [p for p in slack.fake.posts(thread=round_ts) if "answer #" in p["text"]]
    assert [r["text"].split()[0] for r in results] == [f"<@{ALICE}>", f"<@{BOB}>", f"<@{BOB}>"]
    assert "passed" in results[0]["blocks"][0]["text"]["text"] and "wrong" in results[1]["text"]
    assert slack.fake.reactions(alice_ts) == [("add", RECEIVED), ("remove", RECEIVED), ("add", PASSED)]
    assert_manifest_allows(slack.fake)


# ------------------------------------------------------------------------------------ commands

async def test_slash_commands_help_refusals_and_unknown(slack: Slack) -> None:
    await slack.slash(ALICE, "help")
    help_msg = slack.fake.ephemerals(ALICE)[-1]
    assert help_msg["channel"] == CHANNEL and "/quiz leaderboard" in shown(help_msg)
    assert "/quiz enable" not in shown(help_msg)  # a player sees the commands they may use

    await slack.slash(MOD, "enable")  # Mona is a workspace admin (users.info)
    await slack.slash(ALICE, "post c1")
    refusal = slack.fake.ephemerals(ALICE)[-1]
    assert "`/quiz post` is for quiz moderators" in shown(refusal)
    assert await slack.count("rounds") == 0
    await slack.slash(HANA, "post c1")  # Hana is in the quiz-moderator user group
    assert await slack.count("rounds") == 1

    await slack.slash(ALICE, "leaderbord")
    assert "Unknown command `/quiz leaderbord`. Did you mean `/quiz leaderboard`?" in \
        shown(slack.fake.ephemerals(ALICE)[-1])
    # names, admin flags and groups are cached: one lookup per user, one group list
    assert len([p for p in slack.fake.called("users.info") if p["user"] == ALICE]) == 1
    assert len(slack.fake.called("usergroups.list")) == 1


async def test_replies_reach_a_channel_the_bot_is_not_in(slack: Slack) -> None:
    """A public channel is joined; in a private one the reply goes through the response_url,
    with a hint to invite the bot."""
    await slack.slash(MOD, "enable", channel="C0PUB", name="pub")
    assert [p["channel"] for p in slack.fake.called("conversations.join")] == ["C0PUB"]
    assert "C0PUB" in slack.fake.bot_channels  # a member: Slack sends it the answers in round threads
    assert "Quiz enabled" in shown(slack.fake.posts(channel="C0PUB")[-1])

    slack.fake.private.add("C0PRIV")
    await slack.slash(MOD, "enable", channel="C0PRIV", name="priv")
    enabled, hint = slack.fake.responses[-2:]
    assert enabled["response_type"] == "in_channel" and "Quiz enabled" in texts(enabled["blocks"])
    assert hint["response_type"] == "ephemeral" and f"/invite <@{BOT_USER}>" in hint["text"]
    await slack.slash(ALICE, "help", channel="C0PRIV", name="priv")
    assert "/quiz leaderboard" in texts(slack.fake.responses[-1]["blocks"])


async def test_export_file_goes_to_the_managers_dm(slack: Slack) -> None:
    await slack.slash(MOD, "enable")
    await slack.slash(MOD, "post c1")
    await slack.settle()
    await slack.say(ALICE, RIGHT, thread=slack.round_post()["ts"])
    await slack.settle()
    await slack.slash(ALICE, "export")
    assert "is for quiz managers" in shown(slack.fake.ephemerals(ALICE)[-1])
    assert not slack.fake.called("files.completeUploadExternal")

    await slack.slash(MOD, "export")
    assert slack.fake.called("conversations.open")[-1]["users"] == MOD
    done = slack.fake.called("files.completeUploadExternal")[-1]
    assert done["channel_id"] == f"D{MOD}" and done["files"][0]["title"] == "quiz-scores-all.csv"
    csv = slack.fake.uploads[done["files"][0]["id"]].decode()
    assert csv.splitlines()[1].split(",")[4] == "Alice"
    note = slack.fake.ephemerals(MOD)[-1]
    assert "Score export" in shown(note) and "Sent to you in a direct message: quiz-scores-all.csv" in shown(note)
    assert_manifest_allows(slack.fake)


# ------------------------------------------------------------------------------------ answers

async def test_thread_answers_are_graded_with_reactions_and_chatter_ignored(slack: Slack) -> None:
    await slack.slash(MOD, "enable")
    await slack.slash(MOD, "post c1")
    await slack.settle()
    round_ts = slack.round_post()["ts"]

    chatter = await slack.say(ALICE, "is `x.view` a copy?")
    await slack.say(BOT_USER, RIGHT, thread=round_ts, bot_id=BOT_ID)  # our own post
    await slack.say("U0OTHERBOT", RIGHT, thread=round_ts, subtype="bot_message", bot_id="B0OTHER")
    await slack.say(ALICE, RIGHT, thread=round_ts, subtype="message_changed")
    assert await slack.count("answers") == 0
    assert slack.fake.reactions(chatter) == [] and not slack.fake.ephemerals(ALICE)

    wrong = await slack.say(ALICE, "```python\ndef solve(x):\n    return x\n```", thread=round_ts)
    assert slack.fake.reactions(wrong) == [("add", RECEIVED)]
    await slack.settle()
    assert slack.fake.reactions(wrong)[-1] == ("add", NOT_PASSED)

    huge = await slack.say(ALICE, "```python\n" + "x = 1\n" * 5000 + "```", thread=round_ts)
    refusal = slack.fake.ephemerals(ALICE)[-1]
    assert "the limit is" in shown(refusal) and refusal["thread_ts"] == round_ts  # privately, in place
    assert slack.fake.reactions(huge) == [] and await slack.count("answers") == 1


async def test_escaped_message_text_reaches_the_core_intact(slack: Slack) -> None:
    """Slack sends `<`, `>` and `&` as entities in `text`, and rich text as typed: either way
    the runner gets the code the player wrote."""
    await slack.slash(MOD, "enable")
    await slack.slash(MOD, "post c1")
    await slack.settle()
    round_ts = slack.round_post()["ts"]
    code = "def solve(x):\n    return x * 2 if (x < 3) & (x >= 0) else x  # PASS -> '&lt;'"
    await slack.say(ALICE, f"```{code}```", thread=round_ts)  # text only (an API post, a markup client)
    await slack.say(BOB, f"```{code}```", thread=round_ts, blocks=rich("", code))  # the rich-text editor
    await slack.settle()
    subs = [j["submission"] for j in slack.runner.jobs if j["kind"] == "code"]
    assert subs == [code + "\n", code + "\n"]


def test_incoming_text_is_what_the_player_typed() -> None:
    """Slack's two spellings of a message, in the core's terms."""
    def text_only(t: str) -> str:
        return render.incoming_text({"text": slack_escape(t)})

    assert text_only("```def f(x):\n    return x < 1```") == "```\ndef f(x):\n    return x < 1```"
    assert text_only("```python\nx = 1\n```") == "```python\nx = 1\n```"  # a language word stays one
    assert text_only("a &lt; b & `c`") == "a &lt; b & `c`"  # typed entities survive the round trip
    assert render.incoming_text({"text": "x", "blocks": rich("look:", "python\nx = a < b")}) \
        == "look:\n```python\nx = a < b\n```"
    section = {"type": "rich_text_section", "elements": [
        {"type": "user", "user_id": ALICE}, {"type": "text", "text": " try "},
        {"type": "text", "text": "x.view(", "style": {"code": True}},
        {"type": "text", "text": "-1)", "style": {"code": True}}, {"type": "text", "text": " "},
        {"type": "emoji", "name": "fire"}]}
    assert render.incoming_text({"text": "", "blocks": [{"type": "rich_text", "elements": [section]}]}) \
        == f"<@{ALICE}> try `x.view(-1)` :fire:"


async def test_modal_answer_refusals_are_shown_in_the_modal_and_nothing_is_stored(slack: Slack) -> None:
    await slack.slash(MOD, "enable")
    await slack.slash(MOD, "post c1")
    await slack.settle()
    await slack.slash(ALICE, "answer")
    opened = slack.fake.called("views.open")[-1]
    assert opened["trigger_id"].startswith("trigger-")
    view = opened["view"]
    field = next(b for b in view["blocks"] if b["type"] == "input")
    assert field["element"]["multiline"] is True and field["element"]["max_length"] == 3000
    assert field["element"]["initial_value"] == "def solve(x):\n    ...\n"
    assert json.loads(view["private_metadata"]) == {"team": TEAM, "channel": CHANNEL, "name": "quiz", "round_id": 1}

    status, body = await slack.submit_view(ALICE, view, None)  # submitted empty
    assert status == 200
    assert json.loads(body) == {"response_action": "errors",
                                "errors": {"answer": "Your answer is empty: paste your code in a ```python block."}}
    assert await slack.count("answers") == 0 and not slack.fake.ephemerals(ALICE)

    await slack.slash(MOD, "post c2")  # round 2 replaces round 1 while the modal is open
    status, body = await slack.submit_view(ALICE, view, "def solve(x):\n    return x * 2\n")
    assert "Round #1 has closed; your answer was not counted" in json.loads(body)["errors"]["answer"]
    assert await slack.count("answers") == 0

    await slack.settle()
    opened = len(slack.fake.called("views.open"))
    await slack.click(ALICE, slack.round_post(0), render.ACTION_ANSWER)  # round 1's button: stale
    assert "Round #1 has closed" in shown(slack.fake.ephemerals(ALICE)[-1])
    assert len(slack.fake.called("views.open")) == opened
    await slack.click(ALICE, slack.round_post(), render.ACTION_ANSWER)  # the Answer button of round 2
    view = slack.fake.called("views.open")[-1]["view"]
    assert json.loads(view["private_metadata"])["round_id"] == 2
    status, body = await slack.submit_view(ALICE, view, "def solve(x):\n    return x * 2\n")
    assert (status, body) == (200, "")
    assert "Answer #1 received (code)" in shown(slack.fake.ephemerals(ALICE)[-1])
    await slack.settle()
    assert (await slack.svc.db.fetchone("SELECT round_id, verdict FROM answers"))[:] == (2, "passed")


async def test_choice_buttons_answer_and_the_closed_round_loses_them(slack: Slack) -> None:
    await slack.slash(MOD, "enable")
    await slack.slash(MOD, "post q1")
    await slack.settle()
    post = slack.round_post()
    buttons = post["blocks"][-1]["elements"]
    assert [b["text"]["text"] for b in buttons] == ["A: first", "B: second", "C: third"]
    assert [json.loads(b["value"]) for b in buttons] == [{"round_id": 1, "key": k} for k in "ABC"]

    status, _ = await slack.click(ALICE, post, f"{render.ACTION_CHOICE}B")
    assert status == 200
    assert "option(s) B" in shown(slack.fake.ephemerals(ALICE)[-1])
    await slack.settle()
    assert (await slack.svc.db.fetchone("SELECT content, verdict FROM answers"))[:] == ("B", "passed")
    result = slack.fake.posts(thread=post["ts"])[-1]
    assert result["text"].startswith(f"<@{ALICE}>") and "passed" in result["text"]

    await slack.slash(MOD, "close")
    await slack.settle()
    update = slack.fake.called("chat.update")[-1]
    assert update["ts"] == post["ts"] and not [b for b in update["blocks"] if b["type"] == "actions"]
    assert "Closed" in texts(update["blocks"]) and "Pick one" in texts(update["blocks"])
    closing = slack.fake.posts(thread=post["ts"])[-1]
    assert "Round #1 closed" in closing["text"] and closing["reply_broadcast"] is True

    await slack.click(BOB, post, f"{render.ACTION_CHOICE}A")  # a stale button
    assert "no open round" in shown(slack.fake.ephemerals(BOB)[-1])
    assert await slack.count("answers") == 1


async def test_several_answer_items_use_checkboxes_and_submit(make: Callable[..., Any]) -> None:
    slack = await make(bank=MiniBank.of(choice_item("q2", correct=("A", "C"))))
    await slack.slash(MOD, "enable")
    await slack.slash(MOD, "post q2")
    await slack.settle()
    post = slack.round_post()
    kinds = [el["type"] for el in post["blocks"][-1]["elements"]]
    assert kinds == ["checkboxes", "button"]
    pick = post["blocks"][-1]["elements"][0]["action_id"]

    status, body = await slack.click(ALICE, post, pick)  # ticking a box only needs an ack
    assert (status, body) == (200, "") and await slack.count("answers") == 0
    await slack.click(ALICE, post, render.ACTION_CHOICES_SUBMIT)  # nothing ticked
    assert "Your answer is empty" in shown(slack.fake.ephemerals(ALICE)[-1])
    state = {"quiz": {pick: {"type": "checkboxes", "selected_options": [{"value": "C"}, {"value": "A"}]}}}
    await slack.click(ALICE, post, render.ACTION_CHOICES_SUBMIT, state=state)
    await slack.settle()
    assert (await slack.svc.db.fetchone("SELECT content, verdict FROM answers"))[:] == ("A,C", "passed")


# ------------------------------------------------------------------------------------ App Home

async def test_app_home_shows_the_card_and_the_board_of_my_channels(slack: Slack) -> None:
    await slack.slash(MOD, "enable")
    await slack.slash(MOD, "post c1")
    await slack.settle()
    await slack.say(ALICE, RIGHT, thread=slack.round_post()["ts"])
    await slack.settle()
    slack.fake.bot_channels.add(OTHER)
    await slack.slash(MOD, "enable", channel=OTHER, name="other")  # Alice is not in #other
    await slack.svc.enable(ChannelRef("slack", "T0ELSEWHERE", "C0X", "x"))  # another workspace

    await slack.event({"type": "app_home_opened", "user": ALICE, "channel": "D0ALICE", "tab": "home",
                       "event_ts": "1.1"})
    published = slack.fake.called("views.publish")[-1]
    assert published["user_id"] == ALICE and published["view"]["type"] == "home"
    blocks = published["view"]["blocks"]
    home = texts(blocks)
    assert f"<#{CHANNEL}>" in home and f"<#{OTHER}>" not in home and "C0X" not in home
    assert "Points: 25" in home and "Streak: 1" in home  # the card
    assert "Leaderboard: This week" in home and "Alice" in home  # the board
    assert len(blocks) <= render.HOME_MAX_BLOCKS

    await slack.event({"type": "app_home_opened", "user": BOB, "channel": "D0BOB", "tab": "home",
                       "event_ts": "1.2"})
    bob_home = texts(slack.fake.called("views.publish")[-1]["view"]["blocks"])
    assert "You have not answered in this channel yet" in bob_home and "Alice" in bob_home
    assert_manifest_allows(slack.fake)


def test_home_view_stays_within_100_blocks() -> None:
    card = Message(kind="card", title="Alice in #q", blocks=[Block("Points: 1\n" * 500)])
    board = Message(kind="leaderboard", title="Leaderboard: This week", blocks=[Block("1. Alice 1 pts\n" * 400)],
                    data={"rows": [{}]})
    view = render.home_view([(ChannelRef("slack", TEAM, f"C{i}"), card, board) for i in range(40)])
    assert len(view["blocks"]) <= render.HOME_MAX_BLOCKS
    assert all(len(b["text"]["text"]) <= render.SECTION_MAX for b in view["blocks"] if b["type"] == "section")
    assert "more quiz channels" in texts(view["blocks"][-1:])


# ------------------------------------------------------------------------------------ security

async def test_bad_signatures_are_rejected_and_nothing_is_done(slack: Slack) -> None:
    status, _ = await slack.slash(MOD, "enable", secret="not-the-secret")
    assert status == 401
    status, _ = await slack.slash(MOD, "enable", timestamp=int(time.time()) - 600)  # a replayed request
    assert status == 401
    status, _ = await slack.event({"type": "message", "channel": CHANNEL, "user": ALICE, "text": RIGHT,
                                   "ts": "1.1"}, secret="not-the-secret")
    assert status == 401
    assert await slack.count("channels") == 0 and slack.fake.calls == []
    # a correctly signed url_verification (Slack checking the HTTP endpoint) is answered
    status, body = await slack.send(json.dumps({"token": "legacy", "challenge": "c-123",
                                                "type": "url_verification"}).encode(), "application/json")
    assert status == 200 and "c-123" in body


async def test_player_output_cannot_ping_anyone(slack: Slack) -> None:
    slack.runner.respond = lambda job: {
        "verdict": "error", "message": "ValueError: <!channel> look", "passed_cases": 0, "total_cases": 2,
        "cases": [], "error": {"type": "ValueError", "message": f"<!channel> and <@{BOB}> & <!here>"}}
    await slack.slash(MOD, "enable")
    await slack.slash(MOD, "post c1")
    await slack.settle()
    round_ts = slack.round_post()["ts"]
    await slack.say(ALICE, "```python\ndef solve(x):\n    raise ValueError('<!channel>')\n```", thread=round_ts)
    await slack.settle()
    result = slack.fake.posts(thread=round_ts)[-1]
    everything = result["text"] + json.dumps(result["blocks"])
    assert "&lt;!channel&gt;" in everything and f"&lt;@{BOB}&gt; &amp; &lt;!here&gt;" in everything
    assert "<!channel>" not in everything and f"<@{BOB}>" not in everything and "<!here>" not in everything
    assert everything.count(f"<@{ALICE}>") == 2  # the player addressed, in the text and the first section


async def test_an_answer_the_runner_never_grades_is_marked_apart_from_wrong(slack: Slack) -> None:
    slack.runner.respond = lambda job: {"verdict": "internal", "message": "worker crashed"}
    await slack.slash(MOD, "enable")
    await slack.slash(MOD, "post c1")
    await slack.settle()
    round_ts = slack.round_post()["ts"]
    ts = await slack.say(ALICE, RIGHT, thread=round_ts)
    for _ in range(8):
        await slack.settle()
        slack.svc.clock.advance(timedelta(seconds=6))
    assert slack.fake.reactions(ts) == [("add", RECEIVED), ("remove", RECEIVED), ("add", UNGRADED_MARK)]
    note = slack.fake.posts(thread=round_ts)[-1]
    assert "could not be graded" in shown(note) and "not counted against you" in shown(note)
    assert await slack.count("scores") == 0


# ------------------------------------------------------------------------------------ limits

async def test_an_over_long_result_is_cut_with_a_note_within_block_kit_limits(slack: Slack) -> None:
    trace = "".join(f"  File \"x.py\", line {i}, in f\n    {'y' * 200}\n" for i in range(2000))
    slack.runner.respond = lambda job: {"verdict": "error", "message": "RecursionError", "passed_cases": 0,
                                        "total_cases": 1, "cases": [],
                                        "error": {"type": "RecursionError", "message": "deep", "traceback": trace}}
    await slack.slash(MOD, "enable")
    await slack.slash(MOD, "post c1")
    await slack.settle()
    round_ts = slack.round_post()["ts"]
    await slack.say(ALICE, "```python\ndef solve(x):\n    return solve(x)\n```", thread=round_ts)
    await slack.settle()
    result = slack.fake.posts(thread=round_ts)[-1]
    blocks = result["blocks"]
    assert len(blocks) <= render.MAX_BLOCKS and len(result["text"]) <= render.FALLBACK_MAX
    assert all(len(b["text"]["text"]) <= render.SECTION_MAX for b in blocks if b["type"] == "section")
    assert all(len(b["text"]["text"]) <= render.HEADER_MAX for b in blocks if b["type"] == "header")
    assert "more characters)" in texts(blocks)  # the cut says how much is missing
    assert blocks[-1] == render.context(render.CUT_CONTEXT)


def test_message_blocks_respect_the_limits() -> None:
    msg = Message(kind="result", title="T" * 400, mention=ALICE,
                  blocks=[Block("x" * 7000), *[Block(f"line {i}\n" * 300, code=True) for i in range(80)]])
    blocks = render.message_blocks(msg)
    assert len(blocks) == render.MAX_BLOCKS and blocks[-1] == render.context(render.CUT_CONTEXT)
    assert len(blocks[0]["text"]["text"]) <= render.HEADER_MAX
    sections = [b["text"]["text"] for b in blocks if b["type"] == "section"]
    assert all(len(s) <= render.SECTION_MAX for s in sections) and sections[0].startswith(f"<@{ALICE}> xxx")
    assert all(s.count("```") % 2 == 0 for s in sections)  # no section leaves a code fence open
    short = render.message_blocks(Message(kind="info", blocks=[Block("hello")]))
    assert short == [render.section("hello")]  # nothing cut, no note


# ------------------------------------------------------------------------------------ modes, manifest

async def test_socket_mode_runs_without_signing_secret_and_never_serves_http(tmp_path: Path, monkeypatch) -> None:
    from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

    svc = await QuizService.open(str(tmp_path / "s.sqlite3"), scenario_bank(), RunnerPool([]), clock=FakeClock(START))
    fake = FakeSlack()
    fake.add_user(ALICE, "Alice")
    fake.bot_channels.add(CHANNEL)
    base_url = await fake.start()
    try:
        with pytest.raises(ValueError, match="signing secret"):
            SlackAdapter(svc, SlackConfig(mode="http"), bot_token=TOKEN)
        with pytest.raises(ValueError, match="app-level token"):
            SlackAdapter(svc, SlackConfig(mode="socket"), bot_token=TOKEN)
        adapter = SlackAdapter(svc, SlackConfig(mode="socket"), bot_token=TOKEN, app_token="xapp-1-A0QUIZ",
                               base_url=base_url)
        with pytest.raises(RuntimeError, match="signing secret"):
            await adapter.listen()
        # what the socket handler hands bolt: an unsigned request in socket_mode
        body = urlencode({"team_id": TEAM, "channel_id": CHANNEL, "channel_name": "quiz", "user_id": ALICE,
                          "command": "/quiz", "text": "help", "response_url": fake.response_url()})
        resp = await adapter.app.async_dispatch(AsyncBoltRequest(body=body, mode="socket_mode"))
        await adapter.idle()
        assert resp.status == 200 and "/quiz leaderboard" in shown(fake.ephemerals(ALICE)[-1])

        handlers: list[AsyncSocketModeHandler] = []

        async def connect(self: AsyncSocketModeHandler) -> None:  # no websocket to Slack in tests
            handlers.append(self)

        monkeypatch.setattr(AsyncSocketModeHandler, "connect_async", connect)
        task = asyncio.create_task(adapter.start())
        await adapter.idle()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        (handler,) = handlers
        assert handler.app is adapter.app and handler.app_token == "xapp-1-A0QUIZ"
        assert handler.client.closed and handler.client.aiohttp_client_session.closed  # stopped with the task
    finally:
        await fake.stop()
        await svc.close()


def test_manifest_describes_the_app() -> None:
    m = yaml.safe_load(MANIFEST.read_text())
    assert m["features"]["bot_user"]["display_name"]
    assert [c["command"] for c in m["features"]["slash_commands"]] == ["/quiz"]
    assert m["features"]["app_home"]["home_tab_enabled"] is True
    settings = m["settings"]
    assert settings["socket_mode_enabled"] is True and settings["interactivity"]["is_enabled"] is True
    assert {"message.channels", "message.groups", "app_home_opened"} <= set(settings["event_subscriptions"]["bot_events"])
    scopes = set(m["oauth_config"]["scopes"]["bot"])
    assert {"commands", "chat:write", "channels:history", "groups:history", "reactions:write", "users:read",
            "usergroups:read", "files:write"} <= scopes
    assert {s for s in METHOD_SCOPES.values() if s} <= scopes
    text = MANIFEST.read_text()
    assert "/slack/events" in text  # the HTTP-mode request URL, in the comments


# ------------------------------------------------------------------------------------ the 3-second acks

def forget_users(slack: Slack) -> None:
    """The adapter's users.info / usergroups.list cache expired: the next action looks them up."""
    slack.adapter._users._data.clear()
    slack.adapter._groups._data.clear()


async def test_slash_command_is_acknowledged_before_slack_lookups(slack: Slack) -> None:
    """A slow users.info (rate-limited: the client sleeps through 429s) must not delay the ack:
    Slack shows the user an error after 3 s."""
    slack.fake.gates["users.info"] = asyncio.Event()
    status, body = await slack.slash(ALICE, "help", wait=False)
    assert (status, body) == (200, "") and slack.took < 1.0
    assert not slack.fake.ephemerals(ALICE)  # the reply is still on its way
    slack.fake.gates["users.info"].set()
    await slack.adapter.idle()
    assert "/quiz leaderboard" in shown(slack.fake.ephemerals(ALICE)[-1])


async def test_modal_submission_is_acknowledged_within_3s_when_slack_is_slow(slack: Slack) -> None:
    await slack.slash(MOD, "enable")
    await slack.slash(MOD, "post c1")
    await slack.settle()
    await slack.slash(ALICE, "answer")
    view = slack.fake.called("views.open")[-1]["view"]
    forget_users(slack)
    slack.fake.gates["users.info"] = asyncio.Event()  # Slack does not answer users.info for now
    status, body = await slack.submit_view(ALICE, view, "def solve(x):\n    return x * 2\n", wait=False)
    assert (status, body) == (200, "") and slack.took < 3.0  # the modal closed in time
    await asyncio.wait_for(slack.adapter.idle(), 3.0)
    assert "Answer #1 received" in shown(slack.fake.ephemerals(ALICE)[-1])
    await slack.settle()
    row = await slack.svc.db.fetchone("SELECT p.name, a.verdict FROM answers a JOIN players p ON p.id = a.player_id")
    assert tuple(row) == ("Alice", "passed")  # the last known name: not renamed to the payload's username


async def test_a_slow_core_closes_the_modal_and_answers_privately(slack: Slack, monkeypatch) -> None:
    from bot.platforms import slack_app

    await slack.slash(MOD, "enable")
    await slack.slash(MOD, "post c1")
    await slack.settle()
    await slack.slash(ALICE, "answer")
    view = slack.fake.called("views.open")[-1]["view"]
    submit = slack.svc.submit

    async def slow_submit(*args: Any, **kw: Any) -> list[Message]:
        await asyncio.sleep(0.4)
        return await submit(*args, **kw)

    monkeypatch.setattr(slack_app, "ACK_S", 0.1)
    monkeypatch.setattr(slack.svc, "submit", slow_submit)
    status, body = await slack.submit_view(ALICE, view, None)  # refused (empty), but too late for the modal
    assert (status, body) == (200, "")
    assert "Your answer is empty" in shown(slack.fake.ephemerals(ALICE)[-1])
    status, body = await slack.submit_view(ALICE, view, "def solve(x):\n    return x * 2\n")
    assert (status, body) == (200, "")
    assert "Answer #1 received" in shown(slack.fake.ephemerals(ALICE)[-1])
    assert await slack.count("answers") == 1


async def test_answer_button_opens_the_modal_while_its_trigger_is_valid(slack: Slack) -> None:
    """views.open takes a trigger_id for 3 s only: a slow user lookup must not use them up."""
    await slack.slash(MOD, "enable")
    await slack.slash(MOD, "post c1")
    await slack.settle()
    slack.fake.gates["users.info"] = asyncio.Event()  # Alice was never looked up; Slack is slow
    status, _ = await slack.click(ALICE, slack.round_post(), render.ACTION_ANSWER, wait=False)
    assert status == 200 and slack.took < 1.0
    await asyncio.wait_for(slack.adapter.idle(), 3.0)
    opened = slack.fake.called("views.open")
    assert opened and json.loads(opened[-1]["view"]["private_metadata"])["round_id"] == 1


def test_views_open_refuses_an_expired_trigger() -> None:
    """The fake keeps Slack's 3 s, so the test above can fail."""
    fake = FakeSlack()
    tid = fake.trigger_id()
    fake.triggers[tid] -= 3.5
    with pytest.raises(Exception, match="expired_trigger_id"):
        fake.m_views_open({"trigger_id": tid, "view": {}})
    with pytest.raises(Exception, match="invalid_trigger_id"):
        fake.m_views_open({"trigger_id": "made-up", "view": {}})


# ------------------------------------------------------------------------------------ failures get a reply

async def test_a_redelivered_message_event_is_not_a_second_attempt(slack: Slack) -> None:
    """Slack sends an event again when it saw no ack in time; it is one answer."""
    await slack.slash(MOD, "enable")
    await slack.slash(MOD, "post c1")
    await slack.settle()
    round_ts = slack.round_post()["ts"]
    ts = await slack.say(ALICE, RIGHT, thread=round_ts)
    event = {"type": "message", "channel": CHANNEL, "user": ALICE, "text": slack_escape(RIGHT), "ts": ts,
             "team": TEAM, "channel_type": "channel", "event_ts": ts, "thread_ts": round_ts}
    status, _ = await slack.event(event)  # the retry: same message, a new event id
    assert status == 200
    assert await slack.count("answers") == 1 and slack.fake.reactions(ts) == [("add", RECEIVED)]


async def test_an_answer_the_bot_fails_on_gets_a_private_reply(slack: Slack, monkeypatch) -> None:
    await slack.slash(MOD, "enable")
    await slack.slash(MOD, "post c1")
    await slack.settle()
    round_ts = slack.round_post()["ts"]

    async def broken(*args: Any, **kw: Any) -> list[Message]:
        raise RuntimeError("database is locked")

    monkeypatch.setattr(slack.svc, "message", broken)
    await slack.say(ALICE, "nice one")  # chatter outside the round's thread: nobody is told anything
    assert not slack.fake.ephemerals(ALICE)
    await slack.say(ALICE, RIGHT, thread=round_ts)
    sorry = slack.fake.ephemerals(ALICE)[-1]
    assert sorry["text"] == SORRY and sorry["thread_ts"] == round_ts


async def test_app_home_says_so_when_it_cannot_be_built(slack: Slack, monkeypatch) -> None:
    await slack.slash(MOD, "enable")

    async def broken(*args: Any, **kw: Any) -> list[Message]:
        raise RuntimeError("database is locked")

    monkeypatch.setattr(slack.svc, "command", broken)
    await slack.event({"type": "app_home_opened", "user": ALICE, "channel": "D0ALICE", "tab": "home",
                       "event_ts": "1.1"})
    published = slack.fake.called("views.publish")[-1]
    assert published["user_id"] == ALICE and "Could not load your quiz card" in texts(published["view"]["blocks"])


async def test_a_modal_without_our_metadata_is_refused_in_the_modal(slack: Slack) -> None:
    view = render.answer_modal(Message(kind="form", title="T", data={"round_id": 1, "kind": "code"}), WHERE)
    view["private_metadata"] = "not ours"
    status, body = await slack.submit_view(ALICE, view, "def solve(x): ...")
    assert status == 200 and json.loads(body)["response_action"] == "errors"
    assert "no longer valid" in json.loads(body)["errors"]["answer"]


# ------------------------------------------------------------------------------------ more limits

def test_buttons_checkboxes_and_the_modal_respect_block_kit_limits() -> None:
    long = "why " * 100
    options = [{"key": k, "text": long} for k in "ABCDEFGHIJKL"]
    for multiple in (False, True):
        (actions,) = render.choice_actions(123, options, multiple)
        assert len(actions["elements"]) <= 25 and len(actions["block_id"]) <= 255
        for el in actions["elements"]:
            assert len(el["action_id"]) <= 255
            if el["type"] == "button":
                assert len(el["text"]["text"]) <= render.BUTTON_TEXT_MAX and len(el["value"]) <= 2000
            else:
                assert len(el["options"]) <= 10
                assert all(len(o["text"]["text"]) <= render.OPTION_TEXT_MAX and len(o["value"]) <= 150
                           for o in el["options"])
    form = Message(kind="form", title="T" * 5000, data={"round_id": 10 ** 9, "kind": "code", "starter": "x" * 4000,
                                                        "entrypoint": "f" * 3000, "max_chars": 20000})
    modal = render.answer_modal(form, ChannelRef("slack", TEAM, CHANNEL, "n" * 500))
    assert len(modal["title"]["text"]) <= render.MODAL_TITLE_MAX
    assert all(len(modal[k]["text"]) <= render.MODAL_TITLE_MAX for k in ("submit", "close"))
    assert len(modal["private_metadata"]) <= 3000 and json.loads(modal["private_metadata"])["round_id"] == 10 ** 9
    field = modal["blocks"][-1]
    assert field["element"]["max_length"] == 3000 and "initial_value" not in field["element"]  # too long to fit
    assert len(field["hint"]["text"]) <= 2000 and len(field["element"]["placeholder"]["text"]) <= 150
    assert all(len(b["text"]["text"]) <= render.SECTION_MAX for b in modal["blocks"] if b["type"] == "section")
    assert len(render.modal_error(Message(kind="error", blocks=[Block("e" * 5000)]))) <= render.MODAL_ERROR_MAX


def test_manifest_lets_the_app_join_and_show_its_dms() -> None:
    m = yaml.safe_load(MANIFEST.read_text())
    scopes = set(m["oauth_config"]["scopes"]["bot"])
    assert "chat:write.public" not in scopes and "channels:join" in scopes  # it joins, so it hears answers
    home = m["features"]["app_home"]
    assert home["messages_tab_enabled"] is True  # exports go to the manager's DM with the app


async def test_a_failed_file_upload_still_answers_the_manager(slack: Slack) -> None:
    """The upload step (files.slack.com, not the Web API) failing: the manager is told, privately."""
    await slack.slash(MOD, "enable")
    slack.fake.upload_status = 500
    await slack.slash(MOD, "export")
    note = slack.fake.ephemerals(MOD)[-1]
    assert "Score export" in shown(note) and "Could not send: quiz-scores-all.csv" in shown(note)
    assert not slack.fake.called("files.completeUploadExternal")


# ------------------------------------------------------------------------------------ learning loop

async def test_hints_are_ephemeral_and_named_mistakes_show_in_the_result(slack: Slack) -> None:
    await slack.slash(MOD, "enable")
    await slack.slash(MOD, "post c1")
    await slack.settle()
    post = slack.round_post()
    assert "Stuck? `/quiz hint`" in shown(post)
    await slack.slash(ALICE, "hint")
    assert "Hint 1 costs 20% of this round's points" in shown(slack.fake.ephemerals(ALICE)[-1])
    await slack.slash(ALICE, "hint reveal")
    revealed = slack.fake.ephemerals(ALICE)[-1]
    assert revealed["channel"] == CHANNEL and "Look at what the example's output" in shown(revealed)
    assert not any("Look at what the example's output" in shown(p) for p in slack.fake.posts(channel=CHANNEL))

    await slack.say(BOB, WRONG_FORM if WRONG_FORM.startswith("```") else "```" + WRONG_FORM + "```",
                    thread=post["ts"])
    await slack.settle()
    result = [p for p in slack.fake.posts(thread=post["ts"]) if "answer #" in p["text"]][-1]
    assert "This looks like a known mistake: You returned the input unchanged" in shown(result)


async def test_practice_is_ephemeral_answered_through_its_button_and_never_in_the_channel(slack: Slack) -> None:
    await slack.slash(MOD, "enable")
    await slack.settle()
    before = len(slack.fake.posts(channel=CHANNEL))
    await slack.slash(ALICE, "practice c2")
    q = slack.fake.ephemerals(ALICE)[-1]
    assert q["channel"] == CHANNEL and "Practice #1" in shown(q)
    await slack.click(ALICE, {**q, "ts": slack.fake.next_ts()}, render.ACTION_ANSWER)  # ephemeral: no ts of its own
    view = slack.fake.called("views.open")[-1]["view"]
    status, _ = await slack.submit_view(ALICE, view, "def solve(x):\n    return x * 2  # PASS\n")
    assert status == 200
    await slack.settle()
    private = [shown(p) for p in slack.fake.ephemerals(ALICE)]
    assert any("passed" in t.lower() and "answer #" in t for t in private)
    assert any("Solved" in t and "practice board" in t for t in private)
    assert len(slack.fake.posts(channel=CHANNEL)) == before  # nothing public
    await slack.slash(ALICE, "review")
    assert "Nothing to review today" in shown(slack.fake.ephemerals(ALICE)[-1])
    await slack.slash(BOB, "leaderboard practice")
    assert "Practice" in shown(slack.fake.posts(channel=CHANNEL)[-1]) and "Alice" in shown(slack.fake.posts(channel=CHANNEL)[-1])


async def test_a_digest_posts_itself_and_reaches_a_managers_direct_messages(slack: Slack) -> None:
    await slack.slash(MOD, "enable")
    await slack.slash(MOD, "digest channel on dm on 10:00 mon")
    assert "you among them" in shown(slack.fake.ephemerals(MOD)[-1])
    await slack.slash(MOD, "post c1")
    await slack.settle()
    await slack.say(ALICE, RIGHT, thread=slack.round_post()["ts"])
    await slack.settle()
    slack.svc.clock.advance(timedelta(days=7, hours=4))  # Monday 10:00 UTC
    await slack.settle()
    opened = slack.fake.called("conversations.open")
    assert opened and opened[-1]["users"] == MOD
    posts = [p for p in slack.fake.called("chat.postMessage") if "posted automatically" in p["text"]]
    assert sorted(p["channel"] for p in posts) == sorted([CHANNEL, f"D{MOD}"])
    uploaded = {p.get("channel_id") for p in slack.fake.called("files.completeUploadExternal")}
    assert {CHANNEL, f"D{MOD}"} <= uploaded  # the chart, in both places
