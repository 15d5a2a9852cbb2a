-- Placeholder: this number belongs to the providers' upstream format, which lands on its own
-- branch. It keeps the migrations in sequence until then; take that branch's file over this one.
SELECT 1;
