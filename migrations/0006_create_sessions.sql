-- Dashboard sessions live on the server: the cookie carries only a random id and this table only
-- its SHA-256, so logging out (or out everywhere) ends a session at once and a copied cookie is
-- worth nothing afterwards. Lifetimes are enforced on every use from created_at and last_seen_at.
CREATE TABLE sessions (
    id_hash      TEXT PRIMARY KEY,
    created_at   INTEGER NOT NULL,
    last_seen_at INTEGER NOT NULL,
    -- one-time messages for the next page, a JSON array of {"kind", "text"}
    flashes      TEXT NOT NULL DEFAULT '[]'
);

CREATE INDEX sessions_last_seen ON sessions (last_seen_at);
