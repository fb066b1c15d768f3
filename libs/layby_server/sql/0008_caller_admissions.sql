-- Slot reservations for INTERACTIONS_MAX_CONCURRENT_CALLER (docs/caller-asks.md#the-concurrency-cap):
-- the caller pool, kept apart from `admissions` so caller asks and the to-user questions never
-- count against each other. Written by the ask service under its own advisory lock before it
-- appends a caller ask; the projector pushes the deadline on while the entry runs or waits as an
-- outcome, and deletes the row when the entry ends. A reservation whose deadline passed no
-- longer counts.

CREATE TABLE IF NOT EXISTS caller_admissions (
    interaction_id  text PRIMARY KEY,
    deadline        timestamptz NOT NULL
);

CREATE INDEX IF NOT EXISTS caller_admissions_deadline_idx ON caller_admissions (deadline);
