-- The schedule keeps its word.
-- Rounds are numbered per channel by the rounds actually posted (a skipped or missed day has no
-- number, so "Question of the day #N" never jumps).
ALTER TABLE rounds ADD COLUMN number INTEGER;
-- Why a day's scheduled round has no question: 'skipped' (a moderator), 'missed' (the bot could
-- not post it inside its window), 'nothing' (the bank had nothing gradable); '' for played rounds.
ALTER TABLE rounds ADD COLUMN reason TEXT NOT NULL DEFAULT '';
-- Posting times before this instant (the channel's enable or its last schedule change) are never
-- posted late nor reported as missed: a schedule applies from its next posting time on.
ALTER TABLE channels ADD COLUMN schedule_since TEXT;
UPDATE rounds SET number = (SELECT COUNT(*) FROM rounds AS r2 WHERE r2.channel_id = rounds.channel_id
                            AND r2.item_id IS NOT NULL AND r2.id <= rounds.id)
 WHERE item_id IS NOT NULL;
UPDATE rounds SET reason = 'skipped' WHERE item_id IS NULL;
