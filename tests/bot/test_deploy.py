"""Deployment: `python -m bot run` refuses bad start-ups with the key path, the healthcheck
reads the heartbeat, and docker-compose.yml keeps the runner's promises (no published port,
a GPU reservation, only the privileges the sandbox needs)."""
from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from pathlib import Path

import yaml

from bot.app import (
    HEARTBEAT_STALE_S,
    PlatformRouter,
    build_adapters,
    health,
    heartbeat_path,
    run_bot,
)
from bot.config import load_config
from bot.core import ChannelRef, FakeClock, Message, RunnerPool, RunnerSlot
from bot.core.service import QuizService

from .helpers import FakeRunner
from .scenario import START, scenario_bank

ROOT = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "config.yaml"
    p.write_text(text, encoding="utf-8")
    return p


async def test_run_refuses_missing_tokens_with_key_paths(tmp_path: Path, monkeypatch) -> None:
    for var in ("DISCORD_TOKEN", "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    cfg = write(tmp_path, "discord: {enabled: true}\nslack: {enabled: true}\n")
    err = io.StringIO()
    assert await run_bot(str(cfg), err=err) == 2
    text = err.getvalue()
    assert "discord.token_env: environment variable DISCORD_TOKEN is not set" in text
    assert "slack.app_token_env: environment variable SLACK_APP_TOKEN is not set" in text  # socket mode
    assert ".env" in text  # says what to do


async def test_run_refuses_bad_settings_and_no_platform(tmp_path: Path) -> None:
    err = io.StringIO()
    assert await run_bot(str(write(tmp_path, "slack: {enabled: true, mode: websocket, port: 99999}\n")), err=err) == 2
    assert "slack.mode: socket or http" in err.getvalue() and "slack.port: a TCP port" in err.getvalue()
    err = io.StringIO()
    assert await run_bot(str(write(tmp_path, "database: {path: x.sqlite3}\n")), err=err) == 2
    assert "no platform is enabled" in err.getvalue()
    assert not (tmp_path / "x.sqlite3").exists()  # refused before touching anything


def test_run_command_line_reports_a_broken_yaml_file(tmp_path: Path) -> None:
    cfg = write(tmp_path, "discord:\n  enabled: [true\n")
    proc = subprocess.run([sys.executable, "-m", "bot", "run", "--config", str(cfg)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2 and f"{cfg}:" in proc.stderr and "not valid YAML" in proc.stderr


def test_healthcheck_reads_the_heartbeat(tmp_path: Path) -> None:
    cfg_path = write(tmp_path, f"database: {{path: {tmp_path / 'data' / 'quiz.sqlite3'}}}\n")
    cfg = load_config(cfg_path, check_env=False)
    out = io.StringIO()
    assert health(str(cfg_path), out) == 1 and "no heartbeat" in out.getvalue()
    beat = heartbeat_path(cfg)
    beat.parent.mkdir(parents=True)
    beat.write_text(f"{time.time():.0f} gpu-1 (cuda)\n")
    out = io.StringIO()
    assert health(str(cfg_path), out) == 0 and "gpu-1 (cuda)" in out.getvalue()
    beat.write_text(f"{time.time() - HEARTBEAT_STALE_S - 5:.0f} gpu-1 (cuda)\n")
    assert health(str(cfg_path), io.StringIO()) == 1


async def test_platform_router_hands_messages_to_their_platform(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("DISCORD_TOKEN", "not-a-real-token")
    cfg = load_config(write(tmp_path, "discord: {enabled: true, guild_ids: [123]}\n"))
    svc = await QuizService.open(str(tmp_path / "q.sqlite3"), scenario_bank(), RunnerPool([]), clock=FakeClock(START))
    try:
        adapters = build_adapters(cfg, svc)
        assert list(adapters) == ["discord"]  # constructed, not connected
        seen: list[tuple[str, str]] = []

        async def fake_sink(ref: ChannelRef, msg: Message) -> str:
            seen.append((ref.platform, msg.kind))
            return "42"

        router = PlatformRouter()
        router.sinks["discord"] = fake_sink
        assert await router(ChannelRef("discord", "1", "2"), Message(kind="round_open")) == "42"
        assert await router(ChannelRef("slack", "T", "C"), Message(kind="info")) is None  # slack is off
        assert seen == [("discord", "round_open")]
    finally:
        await svc.close()


async def test_a_runner_that_comes_up_late_is_asked_again(tmp_path: Path) -> None:
    gpu = FakeRunner(cuda=True, down=True)
    pool = RunnerPool([RunnerSlot("gpu", gpu)])
    await pool.refresh()
    assert pool.capabilities() == {"cpu"} and pool.needs_refresh()
    gpu.down = False
    await pool.refresh()
    assert pool.capabilities() == {"cpu", "cuda"} and not pool.needs_refresh()


# ------------------------------------------------------------------------------ docker-compose.yml

def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))


def test_compose_runner_is_private_gpu_and_only_as_privileged_as_its_sandbox() -> None:
    svc = compose()["services"]
    for name in ("runner", "runner-cpu"):
        r = svc[name]
        assert "ports" not in r and r["expose"] == ["8700"], name
        assert sorted(r["security_opt"]) == ["apparmor=unconfined", "seccomp=unconfined", "systempaths=unconfined"]
        assert not r.get("privileged") and not r.get("cap_add") and not r.get("network_mode")
        assert r["restart"] == "unless-stopped" and "8700/v1/health" in " ".join(r["healthcheck"]["test"])
        assert "RUNNER_TOKEN" in r["environment"]
    devices = svc["runner"]["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["capabilities"] == ["gpu"] and devices[0]["driver"] == "nvidia"
    assert svc["runner-cpu"]["profiles"] == ["cpu"]
    assert svc["runner-cpu"]["build"]["args"]["TORCH_INDEX"] == "cpu"
    assert "runner" in svc["runner-cpu"]["networks"]["default"]["aliases"]  # same URL for the bot


def test_compose_bot_keeps_its_database_on_a_volume_and_has_a_healthcheck() -> None:
    doc = compose()
    bot = doc["services"]["bot"]
    assert "quiz-data:/app/data" in bot["volumes"] and "quiz-data" in doc["volumes"]
    assert load_config(ROOT / "config.example.yaml", check_env=False).database == "data/quiz.sqlite3"  # in the volume
    assert bot["healthcheck"]["test"][-4:] == ["bot", "health", "--config", "/app/config.yaml"]
    assert bot["restart"] == "unless-stopped" and bot["cap_drop"] == ["ALL"]
    dockerfile = (ROOT / "bot" / "Dockerfile").read_text(encoding="utf-8")
    assert "torch" not in dockerfile.replace("no torch", "")  # the bot image never installs torch



async def test_backup_copies_a_live_database_including_its_wal(tmp_path: Path) -> None:
    db = tmp_path / "data" / "quiz.sqlite3"
    db.parent.mkdir()
    cfg = write(tmp_path, f"database: {{path: {db}}}\n")
    svc = await QuizService.open(str(db), scenario_bank(), RunnerPool([]), clock=FakeClock(START))
    try:
        await svc.enable(ChannelRef("console", "local", "quiz", "quiz"))  # committed, maybe only in the WAL
        dest = tmp_path / "backup.sqlite3"
        proc = subprocess.run([sys.executable, "-m", "bot", "backup", "--config", str(cfg), str(dest)], cwd=ROOT,
                              capture_output=True, text=True, timeout=60, check=False)
        assert proc.returncode == 0, proc.stderr
        import sqlite3

        copy = sqlite3.connect(dest)
        assert copy.execute("SELECT COUNT(*) FROM channels").fetchone() == (1,)
        copy.close()
        again = subprocess.run([sys.executable, "-m", "bot", "backup", "--config", str(cfg), str(dest)], cwd=ROOT,
                               capture_output=True, text=True, timeout=60, check=False)
        assert again.returncode == 1 and "exists" in again.stderr  # never overwrites a backup
    finally:
        await svc.close()


async def test_run_serves_slack_end_to_end(tmp_path: Path, monkeypatch) -> None:
    """`python -m bot run` as deployed (Slack in HTTP mode, Web API on a loopback fake): a
    signed `/quiz enable` and `/quiz post` reach the core and the round is posted; the
    heartbeat is written while it runs; a stop signal shuts it down cleanly."""
    import asyncio
    import socket
    from urllib.parse import urlencode

    import aiohttp

    from .fake_slack import TEAM, TOKEN, FakeSlack, signature

    fake = FakeSlack()
    api = await fake.start()
    fake.add_user("U0MOD", "Mona", admin=True)
    fake.bot_channels.add("C0QUIZ")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for var, value in (("SLACK_BOT_TOKEN", TOKEN), ("SLACK_SIGNING_SECRET", "s3cret")):
        monkeypatch.setenv(var, value)
    cfg = write(tmp_path, f"database: {{path: {tmp_path / 'data' / 'quiz.sqlite3'}}}\n"
                          f"slack: {{enabled: true, mode: http, host: 127.0.0.1, port: {port}, api_url: '{api}'}}\n")
    stop = asyncio.Event()
    bot = asyncio.create_task(run_bot(str(cfg), err=io.StringIO(), stop=stop))
    try:
        async with aiohttp.ClientSession() as session:
            async def slash(text: str) -> int:
                body = urlencode({"team_id": TEAM, "channel_id": "C0QUIZ", "channel_name": "quiz",
                                  "user_id": "U0MOD", "user_name": "mona", "command": "/quiz", "text": text,
                                  "response_url": fake.response_url(), "trigger_id": "t1"}).encode()
                ts = str(int(time.time()))
                headers = {"Content-Type": "application/x-www-form-urlencoded", "X-Slack-Request-Timestamp": ts,
                           "X-Slack-Signature": signature("s3cret", ts, body)}
                for _ in range(100):  # the server may still be starting
                    try:
                        async with session.post(f"http://127.0.0.1:{port}/slack/events", data=body,
                                                headers=headers) as resp:
                            return resp.status
                    except aiohttp.ClientConnectorError:
                        await asyncio.sleep(0.1)
                raise AssertionError("the bot never listened")

            assert await slash("enable") == 200
            # bolt acks at once and runs the command after: wait for its reply before the next one,
            # as a moderator would (two commands in flight may be handled in either order)
            for _ in range(100):
                if fake.responses or fake.ephemerals():
                    break
                await asyncio.sleep(0.1)
            assert await slash("post tensor-factory-vs-constructor") == 200  # a choice item: no runner here
            for _ in range(100):
                if any("Question of the day" in json.dumps(p) for p in fake.posts(channel="C0QUIZ")):
                    break
                await asyncio.sleep(0.1)
            else:
                raise AssertionError(f"no round posted: {fake.methods()}")
        assert heartbeat_path(load_config(cfg)).exists()
    finally:
        stop.set()
        code = await asyncio.wait_for(bot, 30)
        await fake.stop()
    assert code == 0
    assert not heartbeat_path(load_config(cfg)).exists()  # a clean stop says so to the healthcheck
