-- The replicas sharing this database (SQLite migration 0020_create_replicas explains the table).
CREATE TABLE replicas (
    id           TEXT PRIMARY KEY,
    name         TEXT NOT NULL,
    addr         TEXT NOT NULL,
    version      TEXT NOT NULL,
    started_at   BIGINT NOT NULL,
    heartbeat_at BIGINT NOT NULL,
    cap_mode     TEXT NOT NULL
);
