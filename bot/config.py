"""The bot's YAML configuration: load, validate (every problem at once, with its key path),
and turn into the core's settings. Secrets never live in the file: the file names the
environment variables that hold them (`token_env: DISCORD_TOKEN`).
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import time
from pathlib import Path
from typing import Any

import yaml

from .core.models import WEEKDAY_NAMES, Schedule
from .core.roles import RoleRules
from .core.scoring import ScoringRules, rules_from_dict
from .core.settings import AnswerSettings, CoreSettings, DigestSettings, GradingSettings, LearningSettings


class ConfigError(Exception):
    def __init__(self, problems: list[str], source: str = "config") -> None:
        self.problems = problems
        super().__init__(f"{source}: {len(problems)} problem(s):\n" + "\n".join(f"  {p}" for p in problems))


@dataclass(frozen=True)
class RemoteRunner:
    name: str
    url: str
    token_env: str
    timeout_s: float = 30.0
    cuda: bool | None = None  # None: ask the runner's health endpoint


@dataclass(frozen=True)
class EmbeddedRunnerConfig:
    enabled: bool = False
    allow_unsandboxed: bool = False
    config: str | None = None


@dataclass(frozen=True)
class DiscordConfig:
    enabled: bool = False
    token_env: str = "DISCORD_TOKEN"
    guild_ids: tuple[str, ...] = ()
    moderator_permission: str = "manage_guild"


@dataclass(frozen=True)
class SlackConfig:
    enabled: bool = False
    mode: str = "socket"
    bot_token_env: str = "SLACK_BOT_TOKEN"
    app_token_env: str = "SLACK_APP_TOKEN"
    signing_secret_env: str = "SLACK_SIGNING_SECRET"
    host: str = "0.0.0.0"
    port: int = 3000
    api_url: str | None = None  # Slack's Web API base; None = https://slack.com/api/ (GovSlack differs)


@dataclass(frozen=True)
class Config:
    database: str = "data/quiz.sqlite3"
    bank_root: str | None = None
    embedded: EmbeddedRunnerConfig = EmbeddedRunnerConfig()
    runners: tuple[RemoteRunner, ...] = ()
    core: CoreSettings = field(default_factory=CoreSettings)
    discord: DiscordConfig = DiscordConfig()
    slack: SlackConfig = SlackConfig()
    console_channel: str = "quiz"
    log_level: str = "INFO"

    def secret(self, env_name: str) -> str:
        value = os.environ.get(env_name, "")
        if not value:
            raise ConfigError([f"environment variable {env_name} is not set"])
        return value


# --------------------------------------------------------------------------- validation

class _V:
    """Walks the raw mapping, records problems with their key path, never stops at the first."""

    def __init__(self, environ: Mapping[str, str] | None = None, env_source: str = "") -> None:
        self.problems: list[str] = []
        self.environ = os.environ if environ is None else environ
        self.env_source = env_source  # the .env file read besides the environment, if any

    def bad(self, path: str, msg: str) -> None:
        self.problems.append(f"{path}: {msg}")

    def section(self, raw: Any, path: str, known: set[str]) -> dict[str, Any]:
        if raw is None:
            return {}
        if not isinstance(raw, dict):
            self.bad(path or "(top)", f"expected a mapping, got {type(raw).__name__}")
            return {}
        for k in raw:
            if k not in known:
                self.bad(f"{path}.{k}" if path else str(k), f"unknown setting (known: {', '.join(sorted(known))})")
        return raw

    def get(self, d: dict[str, Any], key: str, path: str, kind: type | tuple[type, ...], default: Any,
            *, check: Any = None, nullable: bool = False) -> Any:
        full = f"{path}.{key}" if path else key
        if key not in d:
            return default
        value = d[key]
        if value is None and nullable:
            return None
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if isinstance(value, bool) and bool not in kinds:
            self.bad(full, f"expected {'/'.join(k.__name__ for k in kinds)}, got {value!r}")
            return default
        if not isinstance(value, kinds):
            if float in kinds and isinstance(value, int):
                value = float(value)
            else:
                self.bad(full, f"expected {'/'.join(k.__name__ for k in kinds)}, got {value!r}")
                return default
        if check is not None:
            msg = check(value)
            if msg:
                self.bad(full, msg)
                return default
        return value

    def env(self, d: dict[str, Any], key: str, path: str, default: str, *, required: bool) -> str:
        name = self.get(d, key, path, str, default, check=lambda v: None if v.strip() and v.replace("_", "").isalnum()
                        else "an environment variable name like DISCORD_TOKEN")
        if required and name and not self.environ.get(name):
            where = (f"set it in {self.env_source} or export it" if self.env_source else
                     "export it with the secret (with docker compose, put it in the .env file next to "
                     "docker-compose.yml)")
            self.bad(f"{path}.{key}", f"environment variable {name} is not set: {where}")
        return name


def _positive(v: float) -> str | None:
    return None if v > 0 else "must be greater than 0"


def parse_config(raw: Any, *, check_env: bool = True, environ: Mapping[str, str] | None = None,
                 env_source: str = "") -> Config:
    """Validate a loaded YAML document; raises ConfigError listing every problem. `environ`
    (default: the process environment) is where the secrets' variables are looked up."""
    from .core.commands import parse_days, parse_duration
    from .core.scheduler import zone

    v = _V(environ, env_source)
    top = v.section(raw, "", {"database", "bank", "runners", "grading", "answers", "schedule", "scoring", "roles",
                              "learning", "discord", "slack", "console", "tick_s", "leaderboard_size", "log_level"})

    db = v.section(top.get("database"), "database", {"path"})
    db_path = v.get(db, "path", "database", str, "data/quiz.sqlite3")
    bank = v.section(top.get("bank"), "bank", {"root"})
    bank_root = v.get(bank, "root", "bank", str, None, nullable=True)

    rn = v.section(top.get("runners"), "runners", {"embedded", "remote"})
    emb = v.section(rn.get("embedded"), "runners.embedded", {"enabled", "allow_unsandboxed", "config"})
    embedded = EmbeddedRunnerConfig(
        enabled=v.get(emb, "enabled", "runners.embedded", bool, False),
        allow_unsandboxed=v.get(emb, "allow_unsandboxed", "runners.embedded", bool, False),
        config=v.get(emb, "config", "runners.embedded", str, None, nullable=True))
    remotes: list[RemoteRunner] = []
    remote_raw = rn.get("remote") or []
    if not isinstance(remote_raw, list):
        v.bad("runners.remote", "expected a list of runners")
        remote_raw = []
    for i, r in enumerate(remote_raw):
        p = f"runners.remote[{i}]"
        r = v.section(r, p, {"name", "url", "token_env", "timeout_s", "cuda"})
        url = v.get(r, "url", p, str, "", check=lambda u: None if u.startswith(("http://", "https://"))
                    else "expected an http:// or https:// URL")
        if "url" not in r:
            v.bad(f"{p}.url", "required")
        cuda = r.get("cuda", "auto")
        if cuda not in (True, False, "auto"):
            v.bad(f"{p}.cuda", "expected true, false or auto")
            cuda = "auto"
        remotes.append(RemoteRunner(
            name=v.get(r, "name", p, str, f"runner-{i + 1}"), url=url,
            token_env=v.env(r, "token_env", p, "RUNNER_TOKEN", required=check_env),
            timeout_s=v.get(r, "timeout_s", p, (int, float), 30.0, check=_positive),
            cuda=None if cuda == "auto" else bool(cuda)))

    gr = v.section(top.get("grading"), "grading", {"concurrency", "retry_s", "retry_max_s", "internal_retries"})
    grading = GradingSettings(
        concurrency=v.get(gr, "concurrency", "grading", int, 4, check=_positive),
        retry_s=float(v.get(gr, "retry_s", "grading", (int, float), 5.0, check=_positive)),
        retry_max_s=float(v.get(gr, "retry_max_s", "grading", (int, float), 300.0, check=_positive)),
        internal_retries=v.get(gr, "internal_retries", "grading", int, 5, check=_positive))

    an = v.section(top.get("answers"), "answers", {"max_chars", "max_attempts"})
    answers = AnswerSettings(max_chars=v.get(an, "max_chars", "answers", int, 20_000, check=_positive),
                             max_attempts=v.get(an, "max_attempts", "answers", int, 20, check=_positive))

    sc = v.section(top.get("schedule"), "schedule", {"time", "timezone", "days", "duration", "language", "ramp"})
    schedule = Schedule()

    def _check(fn: Any) -> Any:
        def run(value: Any) -> str | None:
            try:
                fn(value)
            except (ValueError, TypeError) as exc:
                return str(exc)
            return None
        return run

    def _hhmm(s: str) -> None:
        if len(s) != 5 or s[2] != ":":
            raise ValueError(f"{s!r} is not a time of day (HH:MM, quoted)")
        try:
            time.fromisoformat(s)
        except ValueError:
            raise ValueError(f"{s!r} is not a time of day (HH:MM, quoted)") from None

    if isinstance(sc.get("time"), int) and not isinstance(sc.get("time"), bool):
        # YAML 1.1 reads an unquoted 9:00 as base-60, the number 540
        hh, mm = divmod(sc["time"], 60)
        hint = f"write it as '{hh:02d}:{mm:02d}' (quoted)" if 0 <= hh < 24 else "write it as 'HH:MM' (quoted)"
        v.bad("schedule.time", f"{hint}: unquoted, YAML reads {hh}:{mm:02d} as the number {sc['time']}")
        sc = {k: val for k, val in sc.items() if k != "time"}
    t = v.get(sc, "time", "schedule", str, "09:00", check=_check(_hhmm))
    tz = v.get(sc, "timezone", "schedule", str, "UTC", check=_check(zone))
    days = v.get(sc, "days", "schedule", str, "mon-fri", check=_check(parse_days))
    dur = v.get(sc, "duration", "schedule", str, "8h", check=_check(parse_duration))
    lang = v.get(sc, "language", "schedule", str, "en", check=lambda s: None if s in ("zh", "en") else "zh or en")
    ramp = v.get(sc, "ramp", "schedule", bool, True)
    try:
        schedule = Schedule(post_time=time.fromisoformat(t), timezone=tz, weekdays=parse_days(days),
                            duration_min=parse_duration(dur), language=lang, ramp=ramp)
    except ValueError:
        pass  # already reported

    scoring_raw = v.section(top.get("scoring"), "scoring",
                            {*ScoringRules.__dataclass_fields__, "channels"})
    channel_scoring: dict[str, dict[str, Any]] = {}
    base_raw = {k: val for k, val in scoring_raw.items() if k != "channels"}
    scoring = ScoringRules()
    for k, val in base_raw.items():
        if k not in ScoringRules.__dataclass_fields__:
            continue  # already reported as unknown
        try:
            rules_from_dict({k: val})
        except ValueError as exc:
            v.bad(f"scoring.{str(exc).split(':', 1)[0]}", str(exc).split(":", 1)[1].strip())
    try:
        scoring = rules_from_dict(base_raw)
    except ValueError:
        pass
    chans = scoring_raw.get("channels") or {}
    if not isinstance(chans, dict):
        v.bad("scoring.channels", "expected a mapping of platform:workspace:channel to scoring settings")
        chans = {}
    for key, over in chans.items():
        if not isinstance(over, dict):
            v.bad(f"scoring.channels.{key}", "expected a mapping of scoring settings")
            continue
        try:
            rules_from_dict(over, base=scoring)
            channel_scoring[str(key)] = dict(over)
        except ValueError as exc:
            for part in str(exc).split("; "):
                k, _, msg = part.partition(":")
                v.bad(f"scoring.channels.{key}.{k}", msg.strip())

    ro = v.section(top.get("roles"), "roles", {"moderators", "managers", "moderator_roles", "manager_roles",
                                               "admins_are_moderators"})

    def _strs(key: str) -> frozenset[str]:
        val = ro.get(key) or []
        if not isinstance(val, list) or not all(isinstance(x, (str, int)) and not isinstance(x, bool) for x in val):
            v.bad(f"roles.{key}", "expected a list of names or ids")
            return frozenset()
        return frozenset(str(x) for x in val)

    roles = RoleRules(moderators=_strs("moderators"), managers=_strs("managers"),
                      moderator_roles=_strs("moderator_roles"), manager_roles=_strs("manager_roles"),
                      admins_are_moderators=v.get(ro, "admins_are_moderators", "roles", bool, True))

    dc = v.section(top.get("discord"), "discord", {"enabled", "token_env", "guild_ids", "moderator_permission"})
    d_on = v.get(dc, "enabled", "discord", bool, False)
    guilds = dc.get("guild_ids") or []
    if not isinstance(guilds, list):
        v.bad("discord.guild_ids", "expected a list of guild ids")
        guilds = []
    discord = DiscordConfig(enabled=d_on, token_env=v.env(dc, "token_env", "discord", "DISCORD_TOKEN",
                                                           required=check_env and d_on),
                            guild_ids=tuple(str(g) for g in guilds),
                            moderator_permission=v.get(dc, "moderator_permission", "discord", str, "manage_guild"))

    sl = v.section(top.get("slack"), "slack", {"enabled", "mode", "bot_token_env", "app_token_env",
                                              "signing_secret_env", "host", "port", "api_url"})
    s_on = v.get(sl, "enabled", "slack", bool, False)
    mode = v.get(sl, "mode", "slack", str, "socket", check=lambda m: None if m in ("socket", "http")
                 else "socket or http")
    slack = SlackConfig(
        enabled=s_on, mode=mode,
        bot_token_env=v.env(sl, "bot_token_env", "slack", "SLACK_BOT_TOKEN", required=check_env and s_on),
        app_token_env=v.env(sl, "app_token_env", "slack", "SLACK_APP_TOKEN",
                            required=check_env and s_on and mode == "socket"),
        signing_secret_env=v.env(sl, "signing_secret_env", "slack", "SLACK_SIGNING_SECRET",
                                 required=check_env and s_on and mode == "http"),
        host=v.get(sl, "host", "slack", str, "0.0.0.0"),
        port=v.get(sl, "port", "slack", int, 3000, check=lambda p: None if 0 < p < 65536 else "a TCP port"),
        api_url=v.get(sl, "api_url", "slack", str, None, nullable=True,
                      check=lambda u: None if u.startswith(("https://", "http://")) else "an http(s):// URL"))

    co = v.section(top.get("console"), "console", {"channel"})
    console_channel = v.get(co, "channel", "console", str, "quiz")

    le = v.section(top.get("learning"), "learning", {"review_per_day", "practice_hours", "digest"})
    dg = v.section(le.get("digest"), "learning.digest", {"weekday", "time"})
    if isinstance(dg.get("time"), int) and not isinstance(dg.get("time"), bool):
        v.bad("learning.digest.time", "write it as 'HH:MM' (quoted): unquoted, YAML reads it as a number")
        dg = {k: val for k, val in dg.items() if k != "time"}
    weekday = v.get(dg, "weekday", "learning.digest", str, "mon",
                    check=lambda s: None if s[:3].lower() in WEEKDAY_NAMES else "a weekday: mon, tue, ... sun")
    learning = LearningSettings(
        review_per_day=v.get(le, "review_per_day", "learning", int, 3, check=_positive),
        practice_hours=v.get(le, "practice_hours", "learning", int, 24, check=_positive),
        digest=DigestSettings(weekday=WEEKDAY_NAMES.index(weekday[:3].lower()) if weekday[:3].lower() in WEEKDAY_NAMES
                              else 0, time=v.get(dg, "time", "learning.digest", str, "09:00", check=_check(_hhmm))))
    tick_s = float(v.get(top, "tick_s", "", (int, float), 20.0, check=_positive))
    lb = v.get(top, "leaderboard_size", "", int, 10, check=_positive)
    level = v.get(top, "log_level", "", str, "INFO", check=lambda s: None if s.upper() in (
        "DEBUG", "INFO", "WARNING", "ERROR") else "DEBUG, INFO, WARNING or ERROR")

    if v.problems:
        raise ConfigError(v.problems)
    core = CoreSettings(schedule=schedule, scoring=scoring, answers=answers, grading=grading, roles=roles,
                        learning=learning, tick_s=tick_s, leaderboard_size=lb, channel_scoring=channel_scoring)
    return Config(database=db_path, bank_root=bank_root, embedded=embedded, runners=tuple(remotes), core=core,
                  discord=discord, slack=slack, console_channel=console_channel, log_level=level.upper())


def read_dotenv(path: str | os.PathLike[str]) -> dict[str, str]:
    """`KEY=VALUE` lines as docker compose reads a .env file: blank lines and `#` comments
    skipped, an optional `export `, values optionally in single or double quotes."""
    out: dict[str, str] = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.removeprefix("export ").partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        out[key.strip()] = value
    return out


def load_config(path: str | os.PathLike[str], *, check_env: bool = True, dotenv: bool = False) -> Config:
    """Load and validate a config file. With `dotenv`, secrets missing from the environment are
    also looked up in the `.env` file next to the config (what docker compose passes the bot),
    so `check-config config.yaml` works right after writing `.env` as the README shows."""
    p = Path(path)
    try:
        raw = yaml.safe_load(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError([f"{p}: no such file"], str(p)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{p}:{mark.line + 1}" if mark else str(p)
        raise ConfigError([f"{where}: not valid YAML: {getattr(exc, 'problem', exc)}"], str(p)) from None
    environ: Mapping[str, str] | None = None
    source = ""
    env_file = p.resolve().parent / ".env"
    if dotenv and env_file.is_file():
        try:
            environ = {**read_dotenv(env_file), **{k: val for k, val in os.environ.items() if val}}
            source = str(env_file)
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError([f"{env_file}: cannot read it: {exc}"], str(p)) from None
    try:
        return parse_config(raw, check_env=check_env, environ=environ, env_source=source)
    except ConfigError as exc:
        raise ConfigError(exc.problems, str(p)) from None
