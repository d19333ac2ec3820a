-- The learning loop.
-- The known mistake a failing answer behaves like: for a code item the index of the item's wrong
-- answer the runner recognised, for an output item the index of the listed wrong output it
-- matches; NULL when none (or the answer passed). Feedback and digests read it; scores never do.
ALTER TABLE answers ADD COLUMN mistake INTEGER;
-- Hints a player revealed in a round, one row each, in order (n = 1, 2). Each costs a share of
-- the round's points, as the channel's scoring rules said when it was revealed (cost_pct).
CREATE TABLE hints (
    round_id    INTEGER NOT NULL REFERENCES rounds(id) ON DELETE CASCADE,
    player_id   INTEGER NOT NULL REFERENCES players(id) ON DELETE CASCADE,
    n           INTEGER NOT NULL,
    cost_pct    REAL NOT NULL,
    revealed_at TEXT NOT NULL,
    PRIMARY KEY (round_id, player_id, n)
);
-- What a moderator chose for the channel with `/quiz settings` (JSON, e.g. {"names": false}:
-- a round's close shows the approaches players found without naming their first solvers).
ALTER TABLE channels ADD COLUMN options TEXT NOT NULL DEFAULT '{}';
