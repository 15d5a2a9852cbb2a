-- The request log: one row per finished client request, written in batches behind the request
-- path and pruned by age and count. Never a body, a header or a credential. chain and skipped
-- are JSON arrays (the upstream attempts, and the connections left out and why); error_msg is
-- the message the client was told, as an i18n key with its arguments (JSON), so the dashboard
-- shows it in the reader's language.
CREATE TABLE request_log (
    id            INTEGER PRIMARY KEY,
    request_id    TEXT NOT NULL,
    at            INTEGER NOT NULL,
    client_key_id INTEGER NOT NULL DEFAULT 0,
    surface       TEXT NOT NULL,
    model         TEXT NOT NULL DEFAULT '',
    provider      TEXT NOT NULL DEFAULT '',
    connection_id INTEGER NOT NULL DEFAULT 0,
    connection    TEXT NOT NULL DEFAULT '',
    status        INTEGER NOT NULL,
    error_code    TEXT NOT NULL DEFAULT '',
    error_msg     TEXT NOT NULL DEFAULT '',
    attempts      INTEGER NOT NULL DEFAULT 0,
    retries       INTEGER NOT NULL DEFAULT 0,
    failovers     INTEGER NOT NULL DEFAULT 0,
    latency_us    INTEGER NOT NULL DEFAULT 0,
    ttft_us       INTEGER NOT NULL DEFAULT 0,
    stream        INTEGER NOT NULL DEFAULT 0,
    complete      INTEGER NOT NULL DEFAULT 0,
    input_tokens  INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    chain         TEXT NOT NULL DEFAULT '[]',
    skipped       TEXT NOT NULL DEFAULT '[]'
);

CREATE INDEX request_log_at ON request_log (at);

-- Per-minute traffic aggregates (requests, errors by class, latency and time-to-first-token
-- histograms, tokens) per provider and client key, kept so the dashboard's charts survive a
-- restart. minute is unix minutes; data is the aggregate as JSON. Pruned after two days.
CREATE TABLE traffic_minutes (
    minute   INTEGER NOT NULL,
    provider TEXT NOT NULL,
    key_id   INTEGER NOT NULL,
    data     TEXT NOT NULL,
    PRIMARY KEY (minute, provider, key_id)
);
