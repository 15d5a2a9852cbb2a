-- Placeholder: migration 0012 belongs to the combos change, which replaces this file with its
-- own (the same name). It exists only so the migrations after it apply in sequence on a branch
-- that does not carry combos yet.
SELECT 1;
