-- Steps, cancel and retry. Every statement is idempotent.

ALTER TABLE runs DROP CONSTRAINT IF EXISTS runs_status_check;
ALTER TABLE runs ADD CONSTRAINT runs_status_check
    CHECK (status IN ('running', 'parked', 'resumed', 'finished', 'failed', 'cancelled'));
ALTER TABLE runs ADD COLUMN IF NOT EXISTS step_count integer NOT NULL DEFAULT 0;  -- steps recorded so far
ALTER TABLE runs ADD COLUMN IF NOT EXISTS cancelled_by text;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS retried_by text;                         -- the last retry's
