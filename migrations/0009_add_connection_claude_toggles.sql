-- Per-connection toggles of Claude subscription (OAuth) connections, both off by default: the
-- low-priority lane at the 5-hour wall and the weekly limit reset tried before it.
ALTER TABLE provider_connections ADD COLUMN low_priority_lane INTEGER NOT NULL DEFAULT 0;
ALTER TABLE provider_connections ADD COLUMN limit_reset INTEGER NOT NULL DEFAULT 0;
