-- Settings and state live in key_value; every saved settings document also gets a revision row.
CREATE TABLE key_value (
    key        TEXT PRIMARY KEY,
    value      TEXT NOT NULL,
    updated_at INTEGER NOT NULL
);

CREATE TABLE key_value_revisions (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    key        TEXT NOT NULL,
    revision   INTEGER NOT NULL,
    value      TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    UNIQUE (key, revision)
);

CREATE TABLE providers (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    name       TEXT NOT NULL UNIQUE,
    type       TEXT NOT NULL,
    base_url   TEXT NOT NULL,
    resilience TEXT NOT NULL DEFAULT '{}',
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);

CREATE TABLE provider_connections (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    provider_id    INTEGER NOT NULL REFERENCES providers (id) ON DELETE CASCADE,
    name           TEXT NOT NULL,
    auth_type      TEXT NOT NULL,
    -- AES-GCM sealed credential (nonce || ciphertext); never stored in clear.
    secret         BLOB NOT NULL,
    priority       INTEGER NOT NULL DEFAULT 0,
    max_concurrent INTEGER,
    overrides      TEXT NOT NULL DEFAULT '{}',
    enabled        INTEGER NOT NULL DEFAULT 1,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    UNIQUE (provider_id, name)
);

CREATE INDEX provider_connections_provider ON provider_connections (provider_id);

CREATE TABLE client_keys (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    name         TEXT NOT NULL,
    prefix       TEXT NOT NULL,
    -- SHA-256 of the key, hex; the key itself is shown once and never stored.
    key_hash     TEXT NOT NULL UNIQUE,
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER,
    revoked_at   INTEGER
);

INSERT INTO providers (name, type, base_url, created_at, updated_at) VALUES
    ('openai', 'openai', 'https://api.openai.com/v1', CAST(unixepoch('subsec') * 1000 AS INTEGER), CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    ('anthropic', 'anthropic', 'https://api.anthropic.com', CAST(unixepoch('subsec') * 1000 AS INTEGER), CAST(unixepoch('subsec') * 1000 AS INTEGER));
