-- Cooldown and terminal state of each connection, written behind the request path.
CREATE TABLE connection_state (
    connection_id  INTEGER PRIMARY KEY REFERENCES provider_connections (id) ON DELETE CASCADE,
    terminal       TEXT NOT NULL DEFAULT '',
    until_ms       INTEGER NOT NULL DEFAULT 0,
    backoff_level  INTEGER NOT NULL DEFAULT 0,
    last_error     TEXT NOT NULL DEFAULT '',
    last_error_type TEXT NOT NULL DEFAULT '',
    error_code     INTEGER NOT NULL DEFAULT 0,
    last_error_at  INTEGER NOT NULL DEFAULT 0,
    rejections     INTEGER NOT NULL DEFAULT 0,
    probes         INTEGER NOT NULL DEFAULT 0,
    next_probe_ms  INTEGER NOT NULL DEFAULT 0,
    from_upstream  INTEGER NOT NULL DEFAULT 0,
    updated_at     INTEGER NOT NULL
);
