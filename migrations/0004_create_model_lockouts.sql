-- Model lockouts per connection and target (a quota family "family:<name>", a model, or an
-- exact tuple "exact:<model>"), written behind the request path and loaded at start so a
-- lockout survives a restart. Rows of expired lockouts are deleted by the sweep; Load ignores
-- any left behind.
CREATE TABLE model_lockouts (
    provider      TEXT NOT NULL,
    connection_id INTEGER NOT NULL REFERENCES provider_connections (id) ON DELETE CASCADE,
    target        TEXT NOT NULL,
    model         TEXT NOT NULL,
    scope         TEXT NOT NULL,
    reason        TEXT NOT NULL DEFAULT '',
    failure_count INTEGER NOT NULL DEFAULT 1,
    expires_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    PRIMARY KEY (provider, connection_id, target)
);

-- The cascade from provider_connections looks rows up by connection.
CREATE INDEX model_lockouts_connection ON model_lockouts (connection_id);
