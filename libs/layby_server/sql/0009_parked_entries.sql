-- The park-on-subject view (docs/caller-asks.md#parks-on-the-subject): one row per caller ask,
-- projected from its interaction's events. The log decides every change (the visits read each
-- subject's index and entries from the log); this table serves the sweeper (deadlines, and
-- waiting outcomes past their retention) and the subject listing door.
CREATE TABLE IF NOT EXISTS parked_entries (
    interaction_id  text PRIMARY KEY,
    subject         text        NOT NULL,
    run_id          text,
    status          text        NOT NULL,   -- asking | running | finished | failed | gone
    on_expiry       text,
    expiry_at       timestamptz,
    settled_at      timestamptz,
    created_at      timestamptz,
    last_seq        bigint      NOT NULL
);
CREATE INDEX IF NOT EXISTS parked_entries_due_idx ON parked_entries (expiry_at) WHERE status = 'asking';
CREATE INDEX IF NOT EXISTS parked_entries_waiting_idx ON parked_entries (settled_at)
    WHERE status IN ('finished', 'failed');
CREATE INDEX IF NOT EXISTS parked_entries_subject_idx ON parked_entries (subject) WHERE status <> 'gone';
