-- The wire format a provider speaks upstream: chat completions (the default and the behaviour
-- before this column) or the Responses API. A provider of type openai also sends the models its
-- responses_models patterns (a JSON array of globs) match to /v1/responses: OpenAI serves some
-- models only there. Existing openai providers get the list new ones get by default.
ALTER TABLE providers ADD COLUMN upstream_format TEXT NOT NULL DEFAULT 'chat';
ALTER TABLE providers ADD COLUMN responses_models TEXT NOT NULL DEFAULT '[]';
UPDATE providers SET responses_models = '["*codex*","o1-pro*","o3-pro*"]' WHERE type = 'openai';
