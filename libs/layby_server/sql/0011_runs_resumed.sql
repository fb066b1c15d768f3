-- The caller asks a run resolved with its generic tools (docs/caller-asks.md#the-generic-tools):
-- resumed, taken or cancelled, shown as the run's resumed_interactions.
ALTER TABLE runs ADD COLUMN IF NOT EXISTS resumed_interactions jsonb;
