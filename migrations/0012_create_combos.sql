-- Combos: named virtual models. A request whose model is a combo's name is served by one of its
-- targets, tried in the order its strategy chooses. targets is the JSON array the admin API
-- writes ([{"provider","model","connection"?,"weight"}] or [{"combo","weight"}]); targets name
-- providers, connections and other combos by name, and the services refuse deleting or renaming
-- what a combo still names, so a saved combo never dangles. Limits: max_attempts 0 = only the
-- global cap (30), target_timeout_ms 0 = none.
CREATE TABLE combos (
    id                      INTEGER PRIMARY KEY AUTOINCREMENT,
    name                    TEXT NOT NULL UNIQUE,
    strategy                TEXT NOT NULL DEFAULT 'priority',
    targets                 TEXT NOT NULL DEFAULT '[]',
    max_attempts            INTEGER NOT NULL DEFAULT 0,
    target_timeout_ms       INTEGER NOT NULL DEFAULT 0,
    wait_until_reset        INTEGER NOT NULL DEFAULT 0,
    wait_until_reset_max_ms INTEGER NOT NULL DEFAULT 900000,
    created_at              INTEGER NOT NULL,
    updated_at              INTEGER NOT NULL
);
