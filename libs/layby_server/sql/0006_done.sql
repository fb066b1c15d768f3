-- The done list (docs/doors/done.md): where each answer came from, and the recently
-- resolved questions newest first.
ALTER TABLE interactions ADD COLUMN IF NOT EXISTS via text;
CREATE INDEX IF NOT EXISTS interactions_resolved_idx
    ON interactions ((coalesce(answered_at, removed_at)) DESC) WHERE status <> 'pending';
