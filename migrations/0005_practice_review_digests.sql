-- Practice, review and digests posted by themselves.
-- A player's private rounds (`/quiz practice`, `/quiz review`) live in a channel row of their own,
-- a child of the quiz channel (parent_id) owned by the player (owner_id). It is never enabled, so
-- the scheduler never posts there, and its scores never reach the quiz channel's leaderboards:
-- they make the practice board. Grading, scoring and results are the daily round's, unchanged.
ALTER TABLE channels ADD COLUMN parent_id INTEGER REFERENCES channels(id) ON DELETE CASCADE;
ALTER TABLE channels ADD COLUMN owner_id INTEGER REFERENCES players(id);
CREATE INDEX channels_parent ON channels (parent_id, owner_id) WHERE parent_id IS NOT NULL;
-- daily (the channel's rounds), practice or review (a player's private rounds)
ALTER TABLE rounds ADD COLUMN mode TEXT NOT NULL DEFAULT 'daily';
-- Spaced review: an item a player failed or gave up comes back after 1, 3, 7, 21 days (step is
-- the index into those intervals); a failure starts again at the first, the last success ends it.
CREATE TABLE reviews (
    channel_id  INTEGER NOT NULL REFERENCES channels(id) ON DELETE CASCADE,  -- the quiz channel
    player_id   INTEGER NOT NULL REFERENCES players(id) ON DELETE CASCADE,
    item_id     TEXT    NOT NULL,
    step        INTEGER NOT NULL DEFAULT 0,
    due_date    TEXT    NOT NULL,  -- the channel's local date
    updated_at  TEXT    NOT NULL,
    PRIMARY KEY (channel_id, player_id, item_id)
) WITHOUT ROWID;
CREATE INDEX reviews_due ON reviews (channel_id, player_id, due_date);
-- Digests posted by themselves, one row per (channel, period, first day, destination): inserted
-- in the transaction that queues the message, so a restart never posts one twice.
CREATE TABLE digests (
    channel_id   INTEGER NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
    period       TEXT    NOT NULL,  -- week | month
    start_date   TEXT    NOT NULL,
    destination  TEXT    NOT NULL,  -- "channel" or "dm:<platform user id>"
    posted_at    TEXT    NOT NULL,
    PRIMARY KEY (channel_id, period, start_date, destination)
) WITHOUT ROWID;
