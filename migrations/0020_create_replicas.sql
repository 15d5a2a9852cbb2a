-- The replicas sharing this database, one row per running process: id is drawn at each start,
-- name (host and listen address) and addr are for people, heartbeat_at (unix ms) is rewritten
-- every second while the process runs, and cap_mode says how it enforces concurrency caps
-- ('redis', 'share' or 'single'; no CHECK, so an older replica accepts a newer one's mode during
-- a rolling upgrade). A process that stops deletes its row; the others prune the rows of those
-- that died without doing so. started_at is unix ms.
CREATE TABLE replicas (
    id           TEXT PRIMARY KEY,
    name         TEXT NOT NULL,
    addr         TEXT NOT NULL,
    version      TEXT NOT NULL,
    started_at   INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL,
    cap_mode     TEXT NOT NULL
);
