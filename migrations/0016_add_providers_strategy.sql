-- How a provider orders its connections: priority (lower first, round robin among equals; the
-- default and the behaviour before this column) or one of the combo strategies by name.
ALTER TABLE providers ADD COLUMN strategy TEXT NOT NULL DEFAULT 'priority';
