-- Exclusive session leases: one owner holds one connection until expires_at (unix ms). The two
-- UNIQUE constraints are what keeps one connection from two owners and one owner from two
-- connections, whatever races in the process. A row whose time ran out no longer holds its
-- connection; it stays (at most one per connection) so its owner learns that it expired, until
-- the connection is leased again or the lease released. Only the SHA-256 of the owner token is
-- kept. generation counts the acquisitions of one owner: requests must send the current one.
CREATE TABLE session_leases (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    connection_id INTEGER NOT NULL UNIQUE REFERENCES provider_connections (id) ON DELETE CASCADE,
    owner_hash    TEXT NOT NULL UNIQUE,
    client_key_id INTEGER NOT NULL REFERENCES client_keys (id) ON DELETE CASCADE,
    generation    INTEGER NOT NULL,
    acquired_at   INTEGER NOT NULL,
    expires_at    INTEGER NOT NULL
);

CREATE INDEX session_leases_client_key ON session_leases (client_key_id);
