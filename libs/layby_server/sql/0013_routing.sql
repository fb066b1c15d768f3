-- Routed questions (docs/routing.md): who else a question is offered to (a restricted identity
-- in the list sees it), its votes so far, when its next escalation or reminder is due (the
-- sweeper's index), and the sequence of the routing step these columns come from.
ALTER TABLE interactions ADD COLUMN IF NOT EXISTS offered text[];
ALTER TABLE interactions ADD COLUMN IF NOT EXISTS votes jsonb;
ALTER TABLE interactions ADD COLUMN IF NOT EXISTS route_at timestamptz;
ALTER TABLE interactions ADD COLUMN IF NOT EXISTS routed_seq bigint;
CREATE INDEX IF NOT EXISTS interactions_route_idx
    ON interactions (route_at) WHERE status = 'pending' AND route_at IS NOT NULL;
