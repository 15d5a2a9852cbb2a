-- Request and answer bodies in the request log, kept only when --request-log-body-kib is above
-- zero: the first KiB of each, redacted (credentials, key-shaped strings and the values of fields
-- that name secrets) before they are written. NULL when not kept. The truncated flags say a body
-- was longer than what is kept. The bodies go with their rows when the log is pruned.
ALTER TABLE request_log ADD COLUMN request_body TEXT;
ALTER TABLE request_log ADD COLUMN response_body TEXT;
ALTER TABLE request_log ADD COLUMN request_body_truncated INTEGER NOT NULL DEFAULT 0;
ALTER TABLE request_log ADD COLUMN response_body_truncated INTEGER NOT NULL DEFAULT 0;
