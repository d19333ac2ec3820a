-- Indexes for the grading hot path (found by bench/bot.py):
-- the worker's "queued and due" query must not scan every answer ever stored...
CREATE INDEX answers_queued ON answers (next_try_at, id) WHERE state = 'queued';
-- ...and the first solvers of a round, read on every grading, are one index seek away.
CREATE INDEX scores_round_solvers ON scores (round_id, answer_id) WHERE solved = 1;
