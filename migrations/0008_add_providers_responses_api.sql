-- An openai-compatible provider may declare that it serves the Responses API itself; its
-- /v1/responses requests then pass through instead of being translated to chat completions.
ALTER TABLE providers ADD COLUMN responses_api INTEGER NOT NULL DEFAULT 0;
