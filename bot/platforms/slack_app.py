"""The Slack adapter (slack_bolt): `/quiz`, a Block Kit post per round with its thread for
answers, a modal for code, buttons for choice items, reactions on answers, the App Home card.

Socket Mode (an app token, no public URL) by default; HTTP mode serves bolt's aiohttp app on
`/slack/events` and verifies every request's signature. The adapter translates and renders
only: who may run a command, what counts as an answer and how it scores are the core's
decisions (QuizService). The app manifest is slack_manifest.yaml next to this file.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
from aiohttp import web
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError, SlackRequestError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from ..config import SlackConfig
from ..core.answers import may_have_been_an_answer
from ..core.models import UNGRADED, Actor, Attachment, Block, ChannelRef, Message
from ..core.service import QuizService
from . import slack_render as render
from .text import Recent

log = logging.getLogger(__name__)

PLATFORM = "slack"
EVENTS_PATH = "/slack/events"
RECEIVED, PASSED, NOT_PASSED, UNGRADED_MARK = "inbox_tray", "white_check_mark", "x", "warning"
CACHE_S = 300.0  # users' names and admin flags, user groups, channel memberships
ANSWERS_IN = (None, "thread_broadcast", "file_share")  # message subtypes a player writes
SORRY = "Something went wrong on the bot's side; nothing was lost. Please try again in a moment."
HOME_SORRY = "Could not load your quiz card right now. Open this tab again in a moment."
STALE_FORM = "This form is no longer valid: open it again with `/quiz answer` or the round's Answer button."
# Slack wants a view submission acknowledged within 3 s (else the modal shows an error) and a
# trigger_id used within 3 s. Work done before either is bounded: a slow or rate-limited
# users.info (the client sleeps through 429s) must not cost the player their modal.
ACK_S = 2.5  # what a view submission may spend before it is acknowledged
LOOKUP_S = 1.0  # what a lookup ahead of an ack or a views.open may take; then the payload's name
# Posting again cannot help after these: the message is dropped (and logged) rather than
# retried forever ahead of the rest of that channel's messages. A token problem (invalid_auth,
# missing_scope) is not among them: once the admin fixes the app, the messages still go out.
GONE = frozenset({"channel_not_found", "is_archived", "not_in_channel", "account_inactive", "restricted_action",
                  "msg_too_long", "no_text", "team_access_not_granted", "ekm_access_denied", "user_not_in_channel"})
BAD_BLOCKS = frozenset({"invalid_blocks", "invalid_blocks_format", "msg_blocks_too_long"})
NO_THREAD = frozenset({"thread_not_found", "invalid_thread_ts", "cannot_reply_to_message"})

Respond = Callable[..., Awaitable[Any]]


def slack_error(exc: SlackApiError) -> str:
    try:
        return str(exc.response.get("error") or "")
    except Exception:  # noqa: BLE001 - a response without a body
        return ""


class SlackAdapter:
    """Wires a slack_bolt AsyncApp to the QuizService. `base_url` points the Web API client
    elsewhere (tests use a fake Slack on loopback)."""

    def __init__(self, service: QuizService, cfg: SlackConfig | None = None, *, bot_token: str,
                 signing_secret: str | None = None, app_token: str | None = None,
                 base_url: str | None = None) -> None:
        self.svc = service
        self.cfg = cfg or SlackConfig()
        self.mode = self.cfg.mode
        if self.mode == "http" and not signing_secret:
            raise ValueError("Slack HTTP mode needs the signing secret (Basic Information > Signing Secret)")
        if self.mode == "socket" and not app_token:
            raise ValueError("Slack Socket Mode needs an app-level token (xapp-...) with connections:write")
        self.app_token = app_token
        client_kw: dict[str, Any] = {"token": bot_token}
        if base_url:
            client_kw["base_url"] = base_url if base_url.endswith("/") else base_url + "/"
        self.client = AsyncWebClient(**client_kw)
        self.client.retry_handlers.append(AsyncRateLimitErrorRetryHandler(max_retry_count=2))
        # Every HTTP request is verified against the signing secret. Only Socket Mode may run
        # without one: Slack's websocket (opened with the app token) is already authenticated,
        # and `listen()` refuses to serve HTTP without verification.
        self.verifying = bool(signing_secret)
        self.app = AsyncApp(client=self.client, signing_secret=signing_secret or "",
                            request_verification_enabled=self.verifying, name="torch-quizmaster")
        self.receipts: Recent[int, tuple[str, str]] = Recent(ttl_s=24 * 3600.0)  # answer -> (channel, ts)
        self.round_posts: Recent[int, tuple[str, str, list[dict[str, Any]]]] = Recent(ttl_s=8 * 24 * 3600.0)
        self._users: Recent[tuple[str, str], tuple[str, bool]] = Recent(ttl_s=CACHE_S, size=8192)
        self._groups: Recent[str, dict[str, frozenset[str]]] = Recent(ttl_s=CACHE_S, size=64)
        self._members: Recent[str, frozenset[str]] = Recent(ttl_s=CACHE_S)
        self._names: Recent[tuple[str, str], str] = Recent(ttl_s=30 * 24 * 3600.0, size=8192)  # last known
        self._seen: Recent[tuple[str, str], bool] = Recent(ttl_s=3600.0, size=8192)  # messages handled
        self._bot_user: str | None = None
        self._running = 0
        self._quiet = asyncio.Event()
        self._quiet.set()
        self._runner: web.AppRunner | None = None
        self._socket: Any = None
        self.http_port: int | None = None
        self._register()

    def _register(self) -> None:
        app = self.app
        app.command("/quiz")(self.on_command)
        app.event("message")(self.on_message)
        app.event("app_home_opened")(self.on_home)
        app.view(render.VIEW_ANSWER)(self.on_modal)
        app.action(re.compile("^" + re.escape(render.ACTION_CHOICE)))(self.on_choice)
        app.action(re.compile("^" + re.escape(render.ACTION_PICK)))(self.on_pick)
        app.action(render.ACTION_CHOICES_SUBMIT)(self.on_choices)
        app.action(render.ACTION_ANSWER)(self.on_answer_button)

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Run until cancelled: Socket Mode, or the HTTP endpoint on cfg.host:cfg.port."""
        if self.mode == "http":
            port = await self.listen()
            log.info("slack: HTTP mode, listening on %s:%d%s", self.cfg.host, port, EVENTS_PATH)
        else:
            from slack_bolt.adapter.socket_mode.async_handler import (
                AsyncSocketModeHandler,
            )

            self._socket = AsyncSocketModeHandler(self.app, self.app_token)
            await self._socket.connect_async()
            log.info("slack: connected in Socket Mode")
        try:
            await asyncio.Event().wait()
        finally:
            await self.stop()

    async def listen(self, host: str | None = None, port: int | None = None) -> int:
        """Serve bolt's aiohttp app (POST /slack/events: commands, events, interactivity);
        returns the bound port (tests pass port 0)."""
        if not self.verifying:
            raise RuntimeError("refusing to serve Slack's HTTP endpoint without a signing secret")
        runner = web.AppRunner(self.app.web_app(path=EVENTS_PATH, port=self.cfg.port))
        await runner.setup()
        site = web.TCPSite(runner, host or self.cfg.host, self.cfg.port if port is None else port)
        await site.start()
        self._runner = runner
        self.http_port = int(runner.addresses[0][1])
        return self.http_port

    async def stop(self) -> None:
        sock, self._socket = self._socket, None
        if sock is not None:
            with contextlib.suppress(Exception):
                await sock.close_async()
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._quiet.wait(), 5.0)  # let handlers in flight finish

    async def idle(self, timeout: float = 5.0) -> None:
        """Wait until no handler is running. Bolt acknowledges Slack first and runs the handler
        after; tests (and shutdown) wait here for the handlers' Web API calls."""
        for _ in range(5):
            await asyncio.sleep(0)
        await asyncio.wait_for(self._quiet.wait(), timeout)

    @contextlib.asynccontextmanager
    async def _busy(self) -> AsyncIterator[None]:
        self._running += 1
        self._quiet.clear()
        try:
            yield
        finally:
            self._running -= 1
            if not self._running:
                self._quiet.set()

    # ------------------------------------------------------------------ who acts

    async def actor(self, team: str, user_id: str, fallback_name: str | None = None) -> Actor:
        """The Slack user as the core sees them: display name, workspace admin or owner (from
        users.info), and the handles of their user groups as roles; cached a few minutes."""
        known = self._users.get((team, user_id))
        if known is None:
            name, admin = fallback_name or user_id, False
            try:
                user = (await self.client.users_info(user=user_id)).get("user") or {}
                profile = user.get("profile") or {}
                name = (profile.get("display_name") or profile.get("real_name") or user.get("real_name")
                        or user.get("name") or name)
                admin = bool(user.get("is_admin") or user.get("is_owner") or user.get("is_primary_owner"))
            except SlackApiError as exc:
                log.warning("slack: users.info %s failed (%s); treating them as a player", user_id, slack_error(exc))
            known = (str(name), admin)
            self._users.put((team, user_id), known)
            self._names.put((team, user_id), known[0])
        return Actor(PLATFORM, user_id, known[0], await self._roles(team, user_id), known[1])

    async def actor_within(self, team: str, user_id: str, fallback_name: str | None = None, *,
                           timeout: float = LOOKUP_S) -> Actor:
        """`actor()` for a player answering, bounded in time: ahead of an ack or a views.open a
        slow Slack must not make the player wait past 3 s. On timeout, the last known name (a
        player's answer needs no roles), so that the core does not rename them."""
        try:
            return await asyncio.wait_for(self.actor(team, user_id, fallback_name), timeout)
        except TimeoutError:
            log.warning("slack: looking up %s took over %.1f s; answering with what is known", user_id, timeout)
            return Actor(PLATFORM, user_id, self._names.get((team, user_id)) or str(fallback_name or user_id))

    async def _roles(self, team: str, user_id: str) -> frozenset[str]:
        groups = self._groups.get(team)
        if groups is None:
            members: dict[str, set[str]] = {}
            try:
                resp = await self.client.usergroups_list(include_users=True)
                for group in resp.get("usergroups") or []:
                    for uid in group.get("users") or []:
                        members.setdefault(uid, set()).add(str(group.get("handle") or group.get("name")))
            except SlackApiError as exc:  # free workspaces have no user groups
                log.info("slack: usergroups.list failed (%s); no user-group roles", slack_error(exc))
            groups = {uid: frozenset(handles) for uid, handles in members.items()}
            self._groups.put(team, groups)
        return groups.get(user_id, frozenset())

    async def bot_user(self) -> str | None:
        if self._bot_user is None:
            with contextlib.suppress(SlackApiError):
                self._bot_user = (await self.client.auth_test()).get("user_id")
        return self._bot_user

    # ------------------------------------------------------------------ slash command

    async def on_command(self, ack: Any, body: dict[str, Any], respond: Respond) -> None:
        """`/quiz ...`: acknowledged at once (Slack allows 3 s), then the core's replies."""
        async with self._busy():
            await ack()
            name = str(body.get("channel_name") or "")
            where = ChannelRef(PLATFORM, str(body.get("team_id") or ""), str(body.get("channel_id") or ""),
                               "" if name in ("directmessage", "privategroup") else name)
            try:
                actor = await self.actor(where.workspace, str(body.get("user_id")), body.get("user_name"))
                replies = await self.svc.command(actor, where, render.unescape(str(body.get("text") or "")))
                for msg in replies:
                    if msg.kind == "form":  # `/quiz answer` without text: the modal (or the buttons)
                        await self.open_form(where, actor, msg, trigger_id=body.get("trigger_id"), respond=respond)
                    else:
                        await self.reply(where, actor, msg, respond=respond)
            except Exception:
                log.exception("slack: /quiz %r failed", body.get("text"))
                with contextlib.suppress(Exception):
                    await respond(text=SORRY, response_type="ephemeral", replace_original=False)

    # ------------------------------------------------------------------ answers

    async def on_message(self, event: dict[str, Any], body: dict[str, Any]) -> None:
        """A message in a channel the bot is in; the core decides whether it answers. Accepted
        answers get a reaction (and another with the verdict); refusals come back privately."""
        async with self._busy():
            if (event.get("subtype") not in ANSWERS_IN or event.get("bot_id") or not event.get("user")
                    or event.get("channel_type") == "im"):
                return
            text = render.incoming_text(event)
            if not text.strip():
                return
            team = str(body.get("team_id") or event.get("team") or "")
            channel, ts = str(event.get("channel") or ""), str(event.get("ts") or "")
            where = ChannelRef(PLATFORM, team, channel)
            thread = event.get("thread_ts")
            thread = str(thread) if thread and thread != ts else None
            # Slack delivers an event again when it saw no ack within 3 s (a busy bot, a socket
            # reconnect): the same message must not become a second attempt.
            if self._seen.get((channel, ts)):
                log.info("slack: message %s in %s delivered again; already handled", ts, channel)
                return
            self._seen.put((channel, ts), True)
            in_round_thread = False
            try:
                in_round_thread = bool(thread) and await self.svc.is_round_thread(where, str(thread))
                actor = await self.actor(team, str(event["user"]))
                replies = await self.svc.message(actor, where, text, in_round_thread=in_round_thread)
                for msg in replies:
                    if msg.kind == "ack" and "answer_id" in msg.data:
                        self.receipts.put(int(msg.data["answer_id"]), (channel, ts))
                        await self._react(channel, ts, RECEIVED)
                    else:  # too long, no attempts left, round closed: told privately, in place
                        await self._ephemeral(channel, actor.user_id, msg, thread_ts=thread)
            except Exception:
                log.exception("slack: message %s in %s failed", ts, channel)
                if may_have_been_an_answer(text, in_round_thread=in_round_thread):
                    with contextlib.suppress(Exception):
                        in_thread: dict[str, Any] = {"thread_ts": thread} if thread else {}
                        await self.client.chat_postEphemeral(channel=channel, user=str(event["user"]), text=SORRY,
                                                             **in_thread)

    async def open_form(self, where: ChannelRef, actor: Actor, form: Message, *, trigger_id: str | None,
                        respond: Respond | None = None) -> None:
        """The answer form for the open round: a modal for code and output items, the option
        buttons (privately) for choice items."""
        data = form.data
        if data.get("kind") == "choice":
            pick = Message(kind="form", ephemeral=True, blocks=[Block(f"Pick your answer to {form.title}:")])
            extra = render.choice_actions(int(data["round_id"]), data.get("options") or [], bool(data.get("multiple")))
            await self._ephemeral(where.channel, actor.user_id, pick, extra=extra, respond=respond)
            return
        if trigger_id:
            try:
                await self.client.views_open(trigger_id=str(trigger_id), view=render.answer_modal(form, where))
                return
            except SlackApiError as exc:  # the trigger expired (3 s): say how to answer instead
                log.warning("slack: views.open failed: %s", slack_error(exc))
        text = Message(kind="info", ephemeral=True, title=form.title, blocks=form.blocks or [
            Block("Answer with `/quiz answer` followed by your code, or reply in the round's thread.")])
        await self.reply(where, actor, text, respond=respond)

    async def on_modal(self, ack: Any, body: dict[str, Any], view: dict[str, Any]) -> None:
        """The answer modal submitted. The core stores it or refuses it; a refusal is shown in
        the modal under the input (nothing stored) and the modal stays open. Everything before
        the ack is bounded (ACK_S): past it the modal closes and the outcome comes privately."""
        async with self._busy():
            started = time.monotonic()
            where, round_id, text = render.modal_submission(view)
            if where is None:
                await ack(response_action="errors", errors={render.BLOCK_ANSWER: STALE_FORM})
                return
            user = body.get("user") or {}
            acked = False
            actor = Actor(PLATFORM, str(user.get("id")), str(user.get("username") or user.get("name") or ""))
            try:
                actor = await self.actor_within(where.workspace, str(user.get("id")),
                                                user.get("username") or user.get("name"))
                submitting = asyncio.ensure_future(
                    self.svc.submit(actor, where, text, explicit=True, round_id=round_id))
                left = max(0.1, ACK_S - (time.monotonic() - started))
                done, _ = await asyncio.wait({submitting}, timeout=left)
                if not done:  # the core is slow today: close the modal, say the outcome privately
                    log.warning("slack: a modal answer took over %.1f s; acknowledging first", ACK_S)
                    acked = True
                    await ack()
                replies = await submitting
            except Exception:
                log.exception("slack: modal answer failed")
                if not acked:
                    await ack(response_action="errors", errors={render.BLOCK_ANSWER: SORRY})
                else:
                    with contextlib.suppress(Exception):
                        await self.reply(where, actor, Message(kind="error", ephemeral=True, blocks=[Block(SORRY)]))
                return
            refusals = [m for m in replies if m.kind in ("error", "denied")]
            if not acked:
                acked = True
                if refusals:
                    await ack(response_action="errors", errors={render.BLOCK_ANSWER: render.modal_error(refusals[0])})
                    return
                await ack()
            for msg in replies:
                with contextlib.suppress(SlackApiError):
                    await self.reply(where, actor, msg)

    async def on_choice(self, ack: Any, body: dict[str, Any], action: dict[str, Any], respond: Respond) -> None:
        """An option button: the option key is the answer, for the round the button was made for."""
        async with self._busy():
            await ack()
            value = render.parse_value(action.get("value"))
            await self._submit_click(body, str(value.get("key") or ""), value.get("round_id"), respond)

    async def on_pick(self, ack: Any) -> None:
        """A checkbox ticked: nothing to do until Submit (Slack wants every action acknowledged)."""
        async with self._busy():
            await ack()

    async def on_choices(self, ack: Any, body: dict[str, Any], action: dict[str, Any], respond: Respond) -> None:
        """Submit under the checkboxes: the ticked keys are the answer."""
        async with self._busy():
            await ack()
            value = render.parse_value(action.get("value"))
            keys = render.selected_keys(body.get("state"))
            await self._submit_click(body, ", ".join(keys), value.get("round_id"), respond)

    async def on_answer_button(self, ack: Any, body: dict[str, Any], action: dict[str, Any],
                               respond: Respond) -> None:
        """The Answer button under a code or output round: the modal, or why not."""
        async with self._busy():
            await ack()
            try:
                where, actor = await self._click_context(body, bounded=True)  # the trigger lives 3 s
                round_id = render.parse_value(action.get("value")).get("round_id")
                form = await self.svc.answer_form(where, actor=actor, round_id=round_id)
                if form is None or (round_id is not None and form.data.get("round_id") != round_id):
                    for msg in await self.svc.submit(actor, where, "", round_id=round_id):  # the core's refusal
                        await self.reply(where, actor, msg, respond=respond)
                    return
                await self.open_form(where, actor, form, trigger_id=body.get("trigger_id"), respond=respond)
            except Exception:
                log.exception("slack: Answer button failed")
                with contextlib.suppress(Exception):
                    await respond(text=SORRY, response_type="ephemeral", replace_original=False)

    async def _click_context(self, body: dict[str, Any], *, bounded: bool = False) -> tuple[ChannelRef, Actor]:
        user = body.get("user") or {}
        team = str((body.get("team") or {}).get("id") or user.get("team_id") or "")
        channel = body.get("channel") or {}
        where = ChannelRef(PLATFORM, team, str(channel.get("id") or (body.get("container") or {}).get("channel_id")),
                           str(channel.get("name") or ""))
        name = user.get("username") or user.get("name")
        if bounded:
            return where, await self.actor_within(team, str(user.get("id")), name)
        return where, await self.actor(team, str(user.get("id")), name)

    async def _submit_click(self, body: dict[str, Any], text: str, round_id: Any, respond: Respond) -> None:
        try:
            where, actor = await self._click_context(body)
            rid = int(round_id) if round_id is not None else None
            for msg in await self.svc.submit(actor, where, text, explicit=True, round_id=rid):
                await self.reply(where, actor, msg, respond=respond)
        except Exception:
            log.exception("slack: button answer failed")
            with contextlib.suppress(Exception):
                await respond(text=SORRY, response_type="ephemeral", replace_original=False)

    # ------------------------------------------------------------------ App Home

    async def on_home(self, event: dict[str, Any], body: dict[str, Any]) -> None:
        async with self._busy():
            if event.get("tab", "home") != "home" or not event.get("user"):
                return
            user_id = str(event["user"])
            try:
                actor = await self.actor(str(body.get("team_id") or ""), user_id)
                view = await self.home_view(actor, str(body.get("team_id") or ""))
                await self.client.views_publish(user_id=user_id, view=view)
            except Exception:
                log.exception("slack: App Home for %s failed", user_id)
                with contextlib.suppress(Exception):  # not a blank tab: say so
                    await self.client.views_publish(user_id=user_id, view=render.home_error_view(HOME_SORRY))

    async def home_view(self, actor: Actor, team: str, *, limit: int = 24) -> dict[str, Any]:
        """The player's card and the week's board for each enabled quiz channel of the team
        that they are in (a private channel's board is not shown to outsiders)."""
        channels = await self.svc.enabled_channels(PLATFORM, team)
        member_of = await self._member_channels(actor.user_id) if channels else frozenset()
        entries: list[tuple[ChannelRef, Message, Message]] = []
        more = 0
        for ch in channels:
            if member_of is not None and ch.ref.channel not in member_of:
                continue
            if len(entries) >= limit:
                more += 1
                continue
            card = (await self.svc.command(actor, ch.ref, "me"))[0]
            if member_of is None and card.kind != "card":  # membership unknown: only where they played
                continue
            board = (await self.svc.command(actor, ch.ref, "leaderboard week"))[0]
            entries.append((ch.ref, card, board))
        return render.home_view(entries, more=more)

    async def _member_channels(self, user_id: str) -> frozenset[str] | None:
        known = self._members.get(user_id)
        if known is not None:
            return known
        found: set[str] = set()
        cursor = None
        try:
            for _ in range(20):
                resp = await self.client.users_conversations(user=user_id, types="public_channel,private_channel",
                                                             exclude_archived=True, limit=999, cursor=cursor)
                found |= {str(c.get("id")) for c in resp.get("channels") or []}
                cursor = (resp.get("response_metadata") or {}).get("next_cursor")
                if not cursor:
                    break
        except SlackApiError as exc:
            log.warning("slack: users.conversations failed (%s)", slack_error(exc))
            return None
        self._members.put(user_id, frozenset(found))
        return frozenset(found)

    # ------------------------------------------------------------------ replies

    async def reply(self, where: ChannelRef, actor: Actor, msg: Message, *, thread_ts: str | None = None,
                    respond: Respond | None = None) -> None:
        """A reply to what `actor` did: privately when the core says so, else in the channel.
        Files go with it; a private message's files go to the player's DM with the bot."""
        if msg.ephemeral:
            extra = []
            if msg.kind == "practice_open":  # a private question: its answer buttons
                extra += render.round_actions(msg.data)
            if msg.files:
                names = ", ".join(f.filename for f in msg.files)
                sent = await self._dm_files(actor.user_id, msg.files, msg.title)
                extra.append(render.context(f"{'Sent to you in a direct message' if sent else 'Could not send'}: "
                                            f"{render.escape(names)}"))
            await self._ephemeral(where.channel, actor.user_id, msg, thread_ts=thread_ts, extra=extra,
                                  respond=respond)
            return
        try:
            await self._post(where.channel, msg, thread_ts=thread_ts)
        except SlackApiError as exc:
            if respond is None:
                raise
            # not a member of a private channel: Slack still takes the reply on the response_url
            await respond(text=render.fallback_text(msg), blocks=render.message_blocks(msg),
                          response_type="in_channel", replace_original=False)
            if slack_error(exc) in ("not_in_channel", "channel_not_found"):
                bot = await self.bot_user()
                await respond(text=f"I am not a member of this channel, so I cannot post its rounds: invite me "
                                   f"with `/invite {render.mention(bot) or '@the quiz app'}`.",
                              response_type="ephemeral", replace_original=False)
            return
        if msg.files:
            await self._upload(where.channel, msg.files, thread_ts=thread_ts)

    async def _ephemeral(self, channel: str, user_id: str, msg: Message, *, thread_ts: str | None = None,
                         extra: list[dict[str, Any]] | None = None, respond: Respond | None = None) -> None:
        blocks = render.message_blocks(msg, extra=extra)
        text = render.fallback_text(msg)
        try:
            kw: dict[str, Any] = {"thread_ts": thread_ts} if thread_ts else {}
            await self.client.chat_postEphemeral(channel=channel, user=user_id, text=text, blocks=blocks, **kw)
        except SlackApiError as exc:
            if respond is None:
                log.warning("slack: ephemeral reply to %s in %s failed: %s", user_id, channel, slack_error(exc))
                return
            await respond(text=text, blocks=blocks, response_type="ephemeral", replace_original=False)

    async def _post(self, channel: str, msg: Message, *, thread_ts: str | None = None,
                    blocks: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
        """chat.postMessage, robustly: joins a public channel it is not in, falls back to plain
        text if Slack refuses the blocks, to the channel if the thread is gone."""
        kw: dict[str, Any] = {"channel": channel, "text": render.fallback_text(msg),
                              "blocks": blocks if blocks is not None else render.message_blocks(msg),
                              "unfurl_links": False, "unfurl_media": False, **extra}
        if thread_ts:
            kw["thread_ts"] = thread_ts
        joined = False
        for _ in range(4):
            try:
                return dict((await self.client.chat_postMessage(**kw)).data)  # type: ignore[arg-type]
            except SlackApiError as exc:
                err = slack_error(exc)
                if err == "not_in_channel" and not joined:
                    joined = True
                    if await self._join(channel):
                        continue
                elif err in BAD_BLOCKS and "blocks" in kw:
                    log.error("slack: %s refused our blocks (%s); sending it as text", msg.kind, err)
                    kw.pop("blocks")
                    kw["text"] = render.plain_payload(msg)
                    continue
                elif err in NO_THREAD and "thread_ts" in kw:
                    kw.pop("thread_ts")
                    kw.pop("reply_broadcast", None)
                    continue
                raise
        raise RuntimeError("unreachable")  # pragma: no cover

    async def _join(self, channel: str) -> bool:
        try:
            await self.client.conversations_join(channel=channel)
            return True
        except SlackApiError as exc:  # a private channel: someone has to /invite the bot
            log.info("slack: cannot join %s: %s", channel, slack_error(exc))
            return False

    async def _upload(self, channel: str, files: list[Attachment], *, thread_ts: str | None = None,
                      comment: str | None = None) -> None:
        kw: dict[str, Any] = {"thread_ts": thread_ts} if thread_ts else {}
        if comment:
            kw["initial_comment"] = comment
        await self.client.files_upload_v2(
            channel=channel, file_uploads=[{"content": f.data, "filename": f.filename, "title": f.filename}
                                           for f in files], **kw)

    async def _dm_files(self, user_id: str, files: list[Attachment], title: str) -> bool:
        try:
            dm = (await self.client.conversations_open(users=user_id))["channel"]["id"]
            await self._upload(str(dm), files, comment=title or None)
            return True
        except SlackApiError as exc:
            log.warning("slack: could not send files to %s: %s", user_id, slack_error(exc))
            return False
        except (TimeoutError, SlackRequestError, aiohttp.ClientError) as exc:  # the upload step itself
            log.warning("slack: could not upload files for %s: %r", user_id, exc)
            return False

    async def _react(self, channel: str, ts: str, name: str, *, remove: str | None = None) -> None:
        """Reactions are cosmetic: a missing permission or a deleted message is only logged."""
        try:
            if remove:
                with contextlib.suppress(SlackApiError):
                    await self.client.reactions_remove(channel=channel, timestamp=ts, name=remove)
            await self.client.reactions_add(channel=channel, timestamp=ts, name=name)
        except SlackApiError as exc:
            if slack_error(exc) != "already_reacted":
                log.info("slack: reaction %s failed: %s", name, slack_error(exc))

    # ------------------------------------------------------------------ what the bot says by itself

    async def sink(self, ref: ChannelRef, msg: Message) -> str | None:
        """Post a core message. A round's post returns its ts (the round's thread); results
        and notices of a round go into that thread, its close is also sent to the channel.
        Raising leaves the message queued for the next attempt: only transient failures do."""
        channel, thread = ref.channel, msg.thread_ref
        try:
            if msg.kind == "round_open":
                blocks = render.round_blocks(msg)
                posted = await self._post(channel, msg, blocks=blocks)
                ts = str(posted.get("ts") or "")
                if ts and msg.round_id is not None:
                    self.round_posts.put(msg.round_id, (str(posted.get("channel") or channel), ts, blocks))
                return ts or None
            if msg.dm and msg.mention:  # a direct message (a manager's digest), files with it
                dm = str((await self.client.conversations_open(users=msg.mention))["channel"]["id"])
                await self._post(dm, msg)
                if msg.files:
                    await self._upload(dm, msg.files)
                return None
            if msg.ephemeral and msg.mention:  # meant for one player only
                await self._ephemeral(channel, msg.mention, msg, thread_ts=thread)
                return None
            extra: dict[str, Any] = {}
            if msg.kind == "round_close":
                await self._close_round_post(msg)
                if thread:
                    extra["reply_broadcast"] = True  # in the thread and in the channel
            await self._post(channel, msg, thread_ts=thread, **extra)
            if msg.files:
                await self._upload(channel, msg.files, thread_ts=thread)
            if msg.kind == "result":
                await self._mark_answer(msg)
        except SlackApiError as exc:
            if slack_error(exc) in GONE:
                log.warning("slack: dropping a %s message for %s: %s", msg.kind, ref, slack_error(exc))
                return None
            raise
        return None

    async def _close_round_post(self, msg: Message) -> None:
        """The closed round's post loses its buttons (a stale click would be refused anyway)."""
        known = self.round_posts.pop(msg.round_id) if msg.round_id is not None else None
        if known is None:
            return
        channel, ts, blocks = known
        try:
            await self.client.chat_update(channel=channel, ts=ts, text=render.fallback_text(msg),
                                          blocks=render.closed_round_blocks(blocks, "Closed: the answer is in the "
                                                                                    "thread."))
        except SlackApiError as exc:
            log.info("slack: could not update the round post: %s", slack_error(exc))

    async def _mark_answer(self, msg: Message) -> None:
        where = self.receipts.pop(int(msg.data.get("answer_id") or 0))
        if where is not None:
            verdict = str(msg.data.get("verdict") or "")
            mark = PASSED if verdict == "passed" else UNGRADED_MARK if verdict == UNGRADED else NOT_PASSED
            await self._react(*where, mark, remove=RECEIVED)
