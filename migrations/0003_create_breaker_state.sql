-- Circuit breaker state per provider (model '') or per provider and model, written behind the
-- request path and loaded at start so an open breaker stays open across a restart. Closed
-- breakers without failures have no row.
CREATE TABLE breaker_state (
    provider             TEXT NOT NULL REFERENCES providers (name) ON DELETE CASCADE ON UPDATE CASCADE,
    model                TEXT NOT NULL DEFAULT '',
    state                TEXT NOT NULL,
    opened_at            INTEGER NOT NULL DEFAULT 0,
    next_probe_at        INTEGER NOT NULL DEFAULT 0,
    consecutive_failures INTEGER NOT NULL DEFAULT 0,
    last_failure         TEXT NOT NULL DEFAULT '',
    last_failure_at      INTEGER NOT NULL DEFAULT 0,
    updated_at           INTEGER NOT NULL,
    PRIMARY KEY (provider, model)
);
