-- Flow versions (docs/versions.md): the version each run is on (null before versions: 1), and
-- the version of each flow a worker serves where it is not 1 ({"<flow>": <version>}).
ALTER TABLE runs ADD COLUMN IF NOT EXISTS version integer;
-- The sequence of the event that set it: the newest event that carries a version wins, in any order.
ALTER TABLE runs ADD COLUMN IF NOT EXISTS version_seq bigint;
ALTER TABLE workers ADD COLUMN IF NOT EXISTS versions jsonb;
