-- The sweeper's retention pass (docs/operations.md#read-models): gone caller asks by the time
-- they ended. Resolved interactions and runs use interactions_resolved_idx and runs_updated_idx.
CREATE INDEX IF NOT EXISTS parked_entries_gone_idx
    ON parked_entries ((coalesce(settled_at, created_at))) WHERE status = 'gone';
