-- Door definitions (docs/doors/doors.md), projected from their DoorSaved and DoorDeleted events
-- for the list door. A deleted door keeps its row, marked deleted; a deletion projected before the
-- save it follows is a row of its own (kind, target and spec unknown), hence the nullable columns.
CREATE TABLE IF NOT EXISTS doors (
    name        text PRIMARY KEY,
    kind        text,
    target      text,
    subject     text,
    spec        jsonb,
    updated_by  text        NOT NULL,
    updated_at  timestamptz NOT NULL,
    deleted     boolean     NOT NULL DEFAULT false,
    last_seq    bigint      NOT NULL
);
CREATE INDEX IF NOT EXISTS doors_live_idx ON doors (name) WHERE NOT deleted;
