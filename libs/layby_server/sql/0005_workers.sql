-- Workers that reported in: who serves which flows, seen when. Not a projection of
-- the log: each worker repeats its report while it runs, so the table heals by itself.
CREATE TABLE IF NOT EXISTS workers (
    worker_id   text PRIMARY KEY,
    identity    text        NOT NULL,
    host        text,
    pid         integer,
    flows       text[]      NOT NULL,
    concurrency integer,
    started_at  timestamptz NOT NULL DEFAULT now(),
    seen_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS workers_seen_idx ON workers (seen_at DESC);
