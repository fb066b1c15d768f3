-- Projections of the event log. Read models only: `layby projections rebuild` drops these
-- tables and replays the log into them. Every statement is idempotent.

CREATE TABLE IF NOT EXISTS interactions (
    interaction_id  text PRIMARY KEY,
    group_id        text        NOT NULL,
    status          text        NOT NULL CHECK (status IN ('pending', 'answered', 'removed')),
    answer_format   text,
    mode            text,
    audience        text,
    asked_by        text,
    sensitive       boolean,
    created_at      timestamptz,
    timeout_at      timestamptz,
    item            jsonb,          -- the pending-question frame (docs/doors/list.md#the-item)
    answered_by     text,
    answered_at     timestamptz,
    answer          jsonb,          -- absent for sensitive questions
    removed_reason  text,
    removed_at      timestamptz,
    asked_seq       bigint,         -- stream sequence of the Asked event (the CAS point)
    last_seq        bigint      NOT NULL
);

CREATE INDEX IF NOT EXISTS interactions_pending_idx
    ON interactions (created_at) WHERE status = 'pending';

CREATE TABLE IF NOT EXISTS projector_checkpoints (
    name  text PRIMARY KEY,
    seq   bigint NOT NULL
);
