-- Slot reservations for INTERACTIONS_MAX_CONCURRENT (docs/asking.md#concurrency-cap). Written by the ask
-- service under an advisory lock before it appends the Asked event; the projector deletes a
-- row when its question resolves. A reservation whose deadline passed no longer counts, so a
-- crash between reserve and append costs a slot only until that deadline.

CREATE TABLE IF NOT EXISTS admissions (
    interaction_id  text PRIMARY KEY,
    deadline        timestamptz NOT NULL
);

CREATE INDEX IF NOT EXISTS admissions_deadline_idx ON admissions (deadline);
