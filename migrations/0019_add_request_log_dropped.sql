-- What a translation could not carry: the names of the request's fields and tools the
-- upstream's format has no equivalent for ("logprobs", "tools.web_search"), as a JSON array;
-- [] when nothing was dropped, and for every row written before this column.
ALTER TABLE request_log ADD COLUMN dropped TEXT NOT NULL DEFAULT '[]';
