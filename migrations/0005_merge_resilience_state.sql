-- One table for every kind of resilience state (connection cooldowns and terminal states,
-- circuit breakers, model lockouts, and the kinds to come), so one store writes it behind the
-- request path and a shared backend can replace it without touching the engine. value is the
-- state as JSON; provider and connection_id scope a record so it goes with what it belongs to.
CREATE TABLE resilience_state (
    kind          TEXT NOT NULL,
    key           TEXT NOT NULL,
    provider      TEXT REFERENCES providers (name) ON DELETE CASCADE ON UPDATE CASCADE,
    connection_id INTEGER REFERENCES provider_connections (id) ON DELETE CASCADE,
    value         TEXT NOT NULL,
    updated_at    INTEGER NOT NULL,
    PRIMARY KEY (kind, key)
);

CREATE INDEX resilience_state_provider ON resilience_state (provider);
CREATE INDEX resilience_state_connection ON resilience_state (connection_id);

INSERT INTO resilience_state (kind, key, provider, connection_id, value, updated_at)
SELECT 'connection', CAST(connection_id AS TEXT), NULL, connection_id, json_object(
        'connection_id', connection_id,
        'terminal', terminal,
        'until', CASE WHEN until_ms = 0 THEN NULL ELSE strftime('%Y-%m-%dT%H:%M:%fZ', until_ms / 1000.0, 'unixepoch') END,
        'level', backoff_level,
        'last_error', last_error,
        'last_error_type', last_error_type,
        'error_code', error_code,
        'last_error_at', CASE WHEN last_error_at = 0 THEN NULL ELSE strftime('%Y-%m-%dT%H:%M:%fZ', last_error_at / 1000.0, 'unixepoch') END,
        'rejections', rejections,
        'probes', probes,
        'next_probe', CASE WHEN next_probe_ms = 0 THEN NULL ELSE strftime('%Y-%m-%dT%H:%M:%fZ', next_probe_ms / 1000.0, 'unixepoch') END,
        'from_upstream', json(CASE WHEN from_upstream THEN 'true' ELSE 'false' END)),
    updated_at
FROM connection_state;

INSERT INTO resilience_state (kind, key, provider, connection_id, value, updated_at)
SELECT 'breaker', provider || '/' || model, provider, NULL, json_object(
        'provider', provider,
        'model', model,
        'state', state,
        'opened_at', CASE WHEN opened_at = 0 THEN NULL ELSE strftime('%Y-%m-%dT%H:%M:%fZ', opened_at / 1000.0, 'unixepoch') END,
        'next_probe_at', CASE WHEN next_probe_at = 0 THEN NULL ELSE strftime('%Y-%m-%dT%H:%M:%fZ', next_probe_at / 1000.0, 'unixepoch') END,
        'consecutive_failures', consecutive_failures,
        'last_failure', last_failure,
        'last_failure_at', CASE WHEN last_failure_at = 0 THEN NULL ELSE strftime('%Y-%m-%dT%H:%M:%fZ', last_failure_at / 1000.0, 'unixepoch') END),
    updated_at
FROM breaker_state;

INSERT INTO resilience_state (kind, key, provider, connection_id, value, updated_at)
SELECT 'model_lockout', provider || '/' || connection_id || '/' || target, NULL, connection_id, json_object(
        'provider', provider,
        'connection_id', connection_id,
        'model', model,
        'target', target,
        'scope', scope,
        'reason', reason,
        'failure_count', failure_count,
        'expires_at', strftime('%Y-%m-%dT%H:%M:%fZ', expires_at / 1000.0, 'unixepoch')),
    updated_at
FROM model_lockouts;

DROP TABLE connection_state;
DROP TABLE breaker_state;
DROP TABLE model_lockouts;
