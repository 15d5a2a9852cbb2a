-- A provider forwards model names its model list does not show (the upstream decides); one that
-- sets listed_models_only refuses them instead, as every provider did before.
ALTER TABLE providers ADD COLUMN listed_models_only INTEGER NOT NULL DEFAULT 0;
