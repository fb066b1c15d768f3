-- Runs and async parks. Projections of the run events on `<ns>.ev.run.<id>`:
-- `layby projections rebuild` drops and replays these too. Every statement is idempotent.

ALTER TABLE interactions ADD COLUMN IF NOT EXISTS run_id text;

-- The sweeper's work list: pending async parks by deadline.
CREATE INDEX IF NOT EXISTS interactions_async_due_idx
    ON interactions (timeout_at) WHERE status = 'pending' AND mode = 'async';

CREATE TABLE IF NOT EXISTS runs (
    run_id       text PRIMARY KEY,
    flow         text,
    identity     text,
    status       text        NOT NULL CHECK (status IN ('running', 'parked', 'resumed', 'finished', 'failed')),
    generation   integer     NOT NULL DEFAULT 0,
    input        jsonb,
    checkpoint   jsonb,          -- the answers so far, by call index (the durable checkpoint)
    asks         jsonb,          -- the current park's asks: interaction_id, call, question, expiry_at
    expiry_at    timestamptz,    -- the earliest deadline of the current park
    resume_id    text,
    result       jsonb,
    error        text,
    created_at   timestamptz,
    updated_at   timestamptz,
    last_seq     bigint      NOT NULL,   -- guards status, generation, resume_id, result, error
    parked_seq   bigint,                 -- guards asks, expiry_at
    checkpoint_seq bigint                -- guards checkpoint
);

ALTER TABLE runs ADD COLUMN IF NOT EXISTS parked_seq bigint;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS checkpoint_seq bigint;

CREATE INDEX IF NOT EXISTS runs_updated_idx ON runs (updated_at DESC);

-- The pending-question frame is kept as `json`, not `jsonb`: jsonb reorders object keys, and a
-- form's properties must reach the inbox in the author's order.
DO $$
BEGIN
    IF (SELECT data_type FROM information_schema.columns
        WHERE table_schema = current_schema() AND table_name = 'interactions' AND column_name = 'item') = 'jsonb'
    THEN
        ALTER TABLE interactions ALTER COLUMN item TYPE json USING item::json;
    END IF;
END $$;
