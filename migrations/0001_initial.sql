-- The bot's schema. Times are ISO-8601 UTC strings with microseconds ("2025-01-06T09:00:00.000000+00:00")
-- so they sort as text; local dates are "YYYY-MM-DD" in the channel's time zone.

CREATE TABLE channels (
    id            INTEGER PRIMARY KEY,
    platform      TEXT    NOT NULL,
    workspace     TEXT    NOT NULL,
    channel       TEXT    NOT NULL,
    name          TEXT    NOT NULL DEFAULT '',
    enabled       INTEGER NOT NULL DEFAULT 1,
    post_time     TEXT    NOT NULL DEFAULT '09:00',
    timezone      TEXT    NOT NULL DEFAULT 'UTC',
    weekdays      TEXT    NOT NULL DEFAULT '0,1,2,3,4',   -- Monday = 0
    duration_min  INTEGER NOT NULL DEFAULT 480,
    language      TEXT    NOT NULL DEFAULT 'en',
    ramp          INTEGER NOT NULL DEFAULT 1,
    scoring       TEXT    NOT NULL DEFAULT '{}',          -- JSON overrides of the scoring defaults
    created_at    TEXT    NOT NULL,
    UNIQUE (platform, workspace, channel)
);

CREATE TABLE players (
    id            INTEGER PRIMARY KEY,
    platform      TEXT    NOT NULL,
    user_id       TEXT    NOT NULL,
    name          TEXT    NOT NULL,
    UNIQUE (platform, user_id)
);

CREATE TABLE topic_weeks (
    id            INTEGER PRIMARY KEY,
    channel_id    INTEGER NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
    scope         TEXT    NOT NULL,          -- "3" (chapter) or "3.2" (section)
    title         TEXT    NOT NULL DEFAULT '',
    start_date    TEXT    NOT NULL,          -- local dates, inclusive
    end_date      TEXT    NOT NULL,
    created_by    TEXT    NOT NULL DEFAULT '',
    cancelled     INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX topic_weeks_channel ON topic_weeks (channel_id, start_date);

CREATE TABLE rounds (
    id              INTEGER PRIMARY KEY,
    channel_id      INTEGER NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
    item_id         TEXT,                    -- NULL for a skipped day that never opened
    local_date      TEXT    NOT NULL,
    scheduled       INTEGER NOT NULL,        -- 1: the day's scheduled round, 0: posted by hand
    status          TEXT    NOT NULL CHECK (status IN ('open', 'closed', 'skipped')),
    opened_at       TEXT    NOT NULL,
    closes_at       TEXT    NOT NULL,
    closed_at       TEXT,
    kind            TEXT    NOT NULL DEFAULT '',
    difficulty      INTEGER NOT NULL DEFAULT 0,
    chapter         INTEGER NOT NULL DEFAULT 0,
    language        TEXT    NOT NULL DEFAULT 'en',
    expected_output TEXT,                    -- output items: what the runner printed for the snippet
    opened_by       TEXT    NOT NULL DEFAULT '',
    message_ref     TEXT                     -- the platform's message/thread id of the round post
);
-- Posting the day's round is idempotent: a crash or a second tick cannot post twice.
CREATE UNIQUE INDEX rounds_one_scheduled_per_day ON rounds (channel_id, local_date) WHERE scheduled = 1;
-- At most one open round per channel: answers always know where they go.
CREATE UNIQUE INDEX rounds_one_open ON rounds (channel_id) WHERE status = 'open';
CREATE INDEX rounds_channel_opened ON rounds (channel_id, opened_at);
CREATE INDEX rounds_closing ON rounds (status, closes_at);

CREATE TABLE answers (
    id             INTEGER PRIMARY KEY,      -- increasing: the submission order
    round_id       INTEGER NOT NULL REFERENCES rounds(id) ON DELETE CASCADE,
    channel_id     INTEGER NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
    player_id      INTEGER NOT NULL REFERENCES players(id),
    content        TEXT    NOT NULL,
    submitted_at   TEXT    NOT NULL,
    state          TEXT    NOT NULL CHECK (state IN ('queued', 'grading', 'graded', 'abandoned', 'void')),
    tries          INTEGER NOT NULL DEFAULT 0,   -- runner sends that came back `internal`
    next_try_at    TEXT    NOT NULL,
    verdict        TEXT,
    passed_cases   INTEGER,
    total_cases    INTEGER,
    fraction       REAL,
    message        TEXT,
    result_json    TEXT,
    graded_at      TEXT
);
CREATE INDEX answers_pending ON answers (state, next_try_at) WHERE state IN ('queued', 'grading');
CREATE INDEX answers_round_player ON answers (round_id, player_id, id);

-- One row per graded answer (UNIQUE answer_id makes scoring idempotent). `points` is the answer's
-- contribution to the player's round total, so SUM(points) over a round is the player's best
-- attempt plus bonuses. Rows are recomputed from the stored attempts in submission order.
CREATE TABLE scores (
    id             INTEGER PRIMARY KEY,
    answer_id      INTEGER NOT NULL UNIQUE REFERENCES answers(id) ON DELETE CASCADE,
    round_id       INTEGER NOT NULL REFERENCES rounds(id) ON DELETE CASCADE,
    channel_id     INTEGER NOT NULL,
    player_id      INTEGER NOT NULL,
    local_date     TEXT    NOT NULL,         -- the round's local date: periods are channel-local
    chapter        INTEGER NOT NULL DEFAULT 0,
    attempt_value  REAL    NOT NULL DEFAULT 0,  -- this attempt's worth after the penalty
    points         REAL    NOT NULL DEFAULT 0,  -- contribution to the round total
    first_bonus    REAL    NOT NULL DEFAULT 0,
    streak_bonus   REAL    NOT NULL DEFAULT 0,
    solved         INTEGER NOT NULL DEFAULT 0,  -- 1 on the player's first passing answer of the round
    streak         INTEGER NOT NULL DEFAULT 0,
    scored_at      TEXT    NOT NULL
);
CREATE INDEX scores_channel_date ON scores (channel_id, local_date, player_id, points, solved);
CREATE INDEX scores_round ON scores (round_id, player_id);
CREATE INDEX scores_player ON scores (channel_id, player_id, chapter);

-- Monthly totals per player, kept by triggers, so "this month" and "all time" read a few
-- thousand rows instead of a million.
CREATE TABLE player_months (
    channel_id  INTEGER NOT NULL,
    player_id   INTEGER NOT NULL,
    month       TEXT    NOT NULL,            -- "YYYY-MM", channel-local
    points      REAL    NOT NULL DEFAULT 0,
    solved      INTEGER NOT NULL DEFAULT 0,
    attempts    INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (channel_id, month, player_id)
) WITHOUT ROWID;

CREATE TRIGGER scores_ai AFTER INSERT ON scores BEGIN
    INSERT INTO player_months (channel_id, player_id, month, points, solved, attempts)
    VALUES (NEW.channel_id, NEW.player_id, substr(NEW.local_date, 1, 7), NEW.points, NEW.solved, 1)
    ON CONFLICT (channel_id, month, player_id) DO UPDATE SET
        points = points + excluded.points, solved = solved + excluded.solved, attempts = attempts + 1;
END;

CREATE TRIGGER scores_ad AFTER DELETE ON scores BEGIN
    UPDATE player_months SET points = points - OLD.points, solved = solved - OLD.solved,
        attempts = attempts - 1
    WHERE channel_id = OLD.channel_id AND player_id = OLD.player_id AND month = substr(OLD.local_date, 1, 7);
END;

CREATE TRIGGER scores_au AFTER UPDATE OF points, solved ON scores BEGIN
    UPDATE player_months SET points = points - OLD.points + NEW.points,
        solved = solved - OLD.solved + NEW.solved
    WHERE channel_id = NEW.channel_id AND player_id = NEW.player_id AND month = substr(NEW.local_date, 1, 7);
END;

-- Messages the bot sends on its own (round opened/closed, grading results). Written in the same
-- transaction as the change they announce, delivered afterwards, so a restart loses none.
CREATE TABLE outbox (
    id            INTEGER PRIMARY KEY,
    channel_id    INTEGER NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
    round_id      INTEGER,
    payload       TEXT    NOT NULL,
    created_at    TEXT    NOT NULL,
    delivered_at  TEXT
);
CREATE INDEX outbox_pending ON outbox (id) WHERE delivered_at IS NULL;
