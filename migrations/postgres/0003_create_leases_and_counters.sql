-- Named leases for work only one replica sharing the database may do at a time (refreshing an
-- account's OAuth token: two replicas must never spend the same refresh token). A lease ends when
-- its owner gives it up or at expires_at (unix ms), so a replica that dies never holds one long.
CREATE TABLE leases (
    name       TEXT PRIMARY KEY,
    owner      TEXT NOT NULL,
    expires_at BIGINT NOT NULL
);

-- Counters replicas draw ranges of ids from, so rows they write (the request log's) never share
-- an id. value is the last id handed out.
CREATE TABLE counters (
    name  TEXT PRIMARY KEY,
    value BIGINT NOT NULL
);
