-- What each request cost and which tokens it used beyond input and output. input_tokens stays
-- every prompt token (cache reads and writes included); the cache and reasoning columns are
-- parts of input and output. cost_usd is NULL when no price was known for the model.
ALTER TABLE request_log ADD COLUMN cache_read_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE request_log ADD COLUMN cache_write_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE request_log ADD COLUMN reasoning_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE request_log ADD COLUMN cost_usd REAL;

-- A client key's limits as a JSON object (rpm_limit, tpm_limit, daily_budget_usd,
-- monthly_budget_usd, max_parallel, budget_webhook_url); {} = none.
ALTER TABLE client_keys ADD COLUMN limits TEXT NOT NULL DEFAULT '{}';

-- Spend and tokens per quarter hour (bucket = unix seconds / 900), client key, provider, model
-- and connection. Quarter hours, because every time zone's midnight falls on one: a day or
-- month in the configured zone is a whole number of buckets. Kept for 400 days.
CREATE TABLE usage_buckets (
    bucket             INTEGER NOT NULL,
    key_id             INTEGER NOT NULL,
    provider           TEXT    NOT NULL,
    model              TEXT    NOT NULL,
    connection_id      INTEGER NOT NULL,
    requests           INTEGER NOT NULL DEFAULT 0,
    errors             INTEGER NOT NULL DEFAULT 0,
    input_tokens       INTEGER NOT NULL DEFAULT 0,
    output_tokens      INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens  INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens INTEGER NOT NULL DEFAULT 0,
    reasoning_tokens   INTEGER NOT NULL DEFAULT 0,
    cost_usd           REAL    NOT NULL DEFAULT 0,
    unpriced           INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (bucket, key_id, provider, model, connection_id)
);
CREATE INDEX usage_buckets_key ON usage_buckets (key_id, bucket);
