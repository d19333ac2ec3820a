"""A fake Slack Web API on loopback: the methods the Slack adapter calls, every call recorded.

The adapter's real `AsyncWebClient` talks to it over HTTP (its `base_url` points here), so
what a test sees is what Slack would have received: method names, parameters, blocks, the
bytes of uploaded files. It keeps just enough state to answer like Slack: who the users are
(admin or not, user groups), which channels the bot is in (posting elsewhere fails with
`not_in_channel`; public channels can be joined), message timestamps, file uploads, and the
response_url posts of slash commands and buttons.

Given the manifest's bot scopes, it answers `missing_scope` (and records it in `scope_errors`)
for a method the app may not call, and lets `chat:write.public` post to a public channel the
bot is not in, as Slack does. Trigger ids expire after 3 s; `gates` hold a method's answers
back (a slow or rate-limited Slack) until the test opens the gate.
"""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web

TEAM = "T0QUIZ"
BOT_USER = "U0BOT"
BOT_ID = "B0BOT"
TOKEN = "xoxb-test-token"
TRIGGER_TTL_S = 3.0
# the bot scope each Web API method needs (None: no scope; auth.test, views.*)
METHOD_SCOPES: dict[str, str | None] = {
    "chat.postMessage": "chat:write", "chat.postEphemeral": "chat:write", "chat.update": "chat:write",
    "reactions.add": "reactions:write", "reactions.remove": "reactions:write", "users.info": "users:read",
    "usergroups.list": "usergroups:read", "users.conversations": "channels:read",
    "conversations.join": "channels:join", "conversations.open": "im:write",
    "files.getUploadURLExternal": "files:write", "files.completeUploadExternal": "files:write",
    "views.open": None, "views.publish": None, "auth.test": None,
}


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """The X-Slack-Signature Slack puts on a request (v0, HMAC-SHA256)."""
    return "v0=" + hmac.new(secret.encode(), b"v0:" + timestamp.encode() + b":" + body, hashlib.sha256).hexdigest()


class SlackError(Exception):
    """Answered as {"ok": false, "error": ...}, as Slack does."""


@dataclass
class Call:
    method: str
    params: dict[str, Any]


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


class FakeSlack:
    def __init__(self, scopes: set[str] | frozenset[str] | None = None) -> None:
        self.scopes = None if scopes is None else frozenset(scopes)  # None: every method allowed
        self.scope_errors: list[str] = []  # "method needs scope" for each refused call
        self.gates: dict[str, asyncio.Event] = {}  # method -> answered once set
        self.triggers: dict[str, float] = {}  # trigger_id -> when it was issued
        self.calls: list[Call] = []
        self.users: dict[str, dict[str, Any]] = {}
        self.usergroups: list[dict[str, Any]] = []
        self.members: dict[str, set[str]] = {}  # user -> channels they are in
        self.bot_channels: set[str] = set()  # channels the bot is a member of
        self.private: set[str] = set()  # channels the bot cannot join by itself
        self.fail: dict[str, str] = {}  # method -> error to answer with
        self.uploads: dict[str, bytes] = {}
        self.upload_status = 200  # what the upload URL answers
        self.responses: list[dict[str, Any]] = []  # what went to response_urls
        self.url = ""
        self._ts = itertools.count(1)
        self._ids = itertools.count(1)
        self._runner: web.AppRunner | None = None

    # ------------------------------------------------------------------ setup

    def add_user(self, uid: str, name: str, *, admin: bool = False, groups: tuple[str, ...] = (),
                 channels: tuple[str, ...] = ()) -> None:
        self.users[uid] = {"id": uid, "team_id": TEAM, "name": name.lower(), "real_name": name, "is_admin": admin,
                           "is_owner": False, "is_bot": False, "profile": {"display_name": name, "real_name": name}}
        for handle in groups:
            group = next((g for g in self.usergroups if g["handle"] == handle), None)
            if group is None:
                group = {"id": f"S{len(self.usergroups) + 1:03d}", "team_id": TEAM, "handle": handle,
                         "name": handle, "users": []}
                self.usergroups.append(group)
            group["users"].append(uid)
        self.members.setdefault(uid, set()).update(channels)

    async def start(self) -> str:
        """Serve on 127.0.0.1 (a free port); returns the Web API base URL for the client."""
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_post("/upload/{file_id}", self._upload)
        app.router.add_post("/response/{n}", self._response)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        return f"{self.url}/api/"

    async def stop(self) -> None:
        for gate in self.gates.values():
            gate.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def next_ts(self) -> str:
        return f"1736143200.{next(self._ts):06d}"

    def response_url(self) -> str:
        return f"{self.url}/response/{next(self._ids)}"

    def trigger_id(self) -> str:
        """A trigger_id as an interaction carries it: views.open takes it for 3 s."""
        tid = f"trigger-{next(self._ids)}"
        self.triggers[tid] = time.monotonic()
        return tid

    # ------------------------------------------------------------------ what tests read

    def called(self, method: str) -> list[dict[str, Any]]:
        return [c.params for c in self.calls if c.method == method]

    def methods(self) -> set[str]:
        return {c.method for c in self.calls}

    def posts(self, *, channel: str | None = None, thread: str | None = None) -> list[dict[str, Any]]:
        """chat.postMessage calls, optionally in one channel and/or one thread."""
        return [p for p in self.called("chat.postMessage")
                if (channel is None or p.get("channel") == channel)
                and (thread is None or p.get("thread_ts") == thread)]

    def ephemerals(self, user: str | None = None) -> list[dict[str, Any]]:
        return [p for p in self.called("chat.postEphemeral") if user is None or p.get("user") == user]

    def reactions(self, ts: str) -> list[tuple[str, str]]:
        """("add"|"remove", name) on one message, in order."""
        return [(c.method.split(".")[1], c.params["name"]) for c in self.calls
                if c.method in ("reactions.add", "reactions.remove") and c.params.get("timestamp") == ts]

    # ------------------------------------------------------------------ HTTP

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params: dict[str, Any] = dict(request.query)
        if request.content_type == "application/json":
            params.update(await request.json())
        elif request.can_read_body:
            params.update({k: v for k, v in (await request.post()).items() if isinstance(v, str)})
        params = {k: _maybe_json(v) for k, v in params.items()}
        if request.headers.get("Authorization") != f"Bearer {TOKEN}" and params.get("token") != TOKEN:
            return web.json_response({"ok": False, "error": "invalid_auth"})
        self.calls.append(Call(method, params))
        gate = self.gates.get(method)
        if gate is not None:
            await gate.wait()
        try:
            if self.scopes is not None:
                need = METHOD_SCOPES.get(method, "unknown")
                if need is not None and need not in self.scopes:
                    self.scope_errors.append(f"{method} needs {need}")
                    raise SlackError("missing_scope")
            if method in self.fail:
                raise SlackError(self.fail[method])
            handler = getattr(self, "m_" + method.replace(".", "_"), None)
            if handler is None:
                raise SlackError("unknown_method")
            return web.json_response({"ok": True, **handler(params)})
        except SlackError as exc:
            return web.json_response({"ok": False, "error": str(exc)})

    async def _upload(self, request: web.Request) -> web.Response:
        data = await request.read()
        if self.upload_status != 200:  # the file host failing (not a Web API error)
            return web.Response(status=self.upload_status, text="upload failed", content_type="text/plain")
        self.uploads[request.match_info["file_id"]] = data
        return web.Response(text=f"OK - {len(data)}", content_type="text/plain")

    async def _response(self, request: web.Request) -> web.Response:
        self.responses.append(await request.json())
        return web.Response(text="ok", content_type="text/html")

    # ------------------------------------------------------------------ methods

    def _in_channel(self, channel: str) -> None:
        if not channel.startswith("D") and channel not in self.bot_channels:
            raise SlackError("not_in_channel")

    def m_auth_test(self, p: dict[str, Any]) -> dict[str, Any]:
        return {"url": "https://quiz.slack.com/", "team": "Quiz", "user": "quizbot", "team_id": TEAM,
                "user_id": BOT_USER, "bot_id": BOT_ID, "is_enterprise_install": False}

    def m_chat_postMessage(self, p: dict[str, Any]) -> dict[str, Any]:
        public = not p["channel"].startswith(("D", "G")) and p["channel"] not in self.private
        if not (public and self.scopes is not None and "chat:write.public" in self.scopes):
            self._in_channel(p["channel"])
        ts = self.next_ts()
        p["ts"] = ts  # recorded with the call: tests find posts by ts
        return {"channel": p["channel"], "ts": ts,
                "message": {"type": "message", "user": BOT_USER, "bot_id": BOT_ID, "text": p.get("text", ""),
                            "ts": ts, **({"thread_ts": p["thread_ts"]} if p.get("thread_ts") else {})}}

    def m_chat_postEphemeral(self, p: dict[str, Any]) -> dict[str, Any]:
        self._in_channel(p["channel"])
        return {"message_ts": self.next_ts()}

    def m_chat_update(self, p: dict[str, Any]) -> dict[str, Any]:
        self._in_channel(p["channel"])
        return {"channel": p["channel"], "ts": p["ts"], "text": p.get("text", "")}

    def m_reactions_add(self, p: dict[str, Any]) -> dict[str, Any]:
        self._in_channel(p["channel"])
        return {}

    def m_reactions_remove(self, p: dict[str, Any]) -> dict[str, Any]:
        return {}

    def m_views_open(self, p: dict[str, Any]) -> dict[str, Any]:
        issued = self.triggers.get(p.get("trigger_id") or "")
        if issued is None:
            raise SlackError("invalid_trigger_id")
        if time.monotonic() - issued > TRIGGER_TTL_S:
            raise SlackError("expired_trigger_id")
        return {"view": {"id": f"V{next(self._ids)}", **p["view"]}}

    def m_views_publish(self, p: dict[str, Any]) -> dict[str, Any]:
        return {"view": {"id": f"V{next(self._ids)}", **p["view"]}}

    def m_users_info(self, p: dict[str, Any]) -> dict[str, Any]:
        user = self.users.get(p.get("user", ""))
        if user is None:
            raise SlackError("user_not_found")
        return {"user": user}

    def m_usergroups_list(self, p: dict[str, Any]) -> dict[str, Any]:
        with_users = str(p.get("include_users")).lower() in ("1", "true")
        return {"usergroups": [g if with_users else {k: v for k, v in g.items() if k != "users"}
                               for g in self.usergroups]}

    def m_users_conversations(self, p: dict[str, Any]) -> dict[str, Any]:
        mine = self.members.get(p.get("user", ""), set()) & self.bot_channels
        return {"channels": [{"id": c} for c in sorted(mine)], "response_metadata": {"next_cursor": ""}}

    def m_conversations_join(self, p: dict[str, Any]) -> dict[str, Any]:
        if p["channel"] in self.private:
            raise SlackError("method_not_supported_for_channel_type")
        self.bot_channels.add(p["channel"])
        return {"channel": {"id": p["channel"]}}

    def m_conversations_open(self, p: dict[str, Any]) -> dict[str, Any]:
        return {"channel": {"id": f"D{p['users']}"}}

    def m_files_getUploadURLExternal(self, p: dict[str, Any]) -> dict[str, Any]:
        fid = f"F{next(self._ids):04d}"
        return {"upload_url": f"{self.url}/upload/{fid}", "file_id": fid}

    def m_files_completeUploadExternal(self, p: dict[str, Any]) -> dict[str, Any]:
        channel = p.get("channel_id")
        if channel:
            self._in_channel(channel)
        missing = [f["id"] for f in p["files"] if f["id"] not in self.uploads]
        if missing:
            raise SlackError("file_not_uploaded")
        return {"files": [{"id": f["id"], "title": f.get("title"), "size": len(self.uploads[f["id"]])}
                          for f in p["files"]]}
