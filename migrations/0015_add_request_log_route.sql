-- A request that named a combo keeps the combo's name and its decision trace: every target the
-- combo considered, in order, with what became of it (answered, failed, skipped with its reason
-- and until when, deferred as saturated, stopped), as a JSON array.
ALTER TABLE request_log ADD COLUMN combo TEXT NOT NULL DEFAULT '';
ALTER TABLE request_log ADD COLUMN route TEXT NOT NULL DEFAULT '[]';
