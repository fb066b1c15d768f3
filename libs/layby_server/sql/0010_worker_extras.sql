-- The extras keys each flow declared (docs/caller-asks.md#extras), from the workers' reports:
-- {"<flow>": ["<key>", ...]}.
ALTER TABLE workers ADD COLUMN IF NOT EXISTS extras jsonb;
