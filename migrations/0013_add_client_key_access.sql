-- What a client key may address, each a JSON array: allowed_models holds glob patterns over
-- provider/model and combo names ([] = every model), scopes the key's extra rights (only
-- "lease:exclusive" exists), allowed_connections the connection ids the key may lease.
ALTER TABLE client_keys ADD COLUMN allowed_models TEXT NOT NULL DEFAULT '[]';
ALTER TABLE client_keys ADD COLUMN scopes TEXT NOT NULL DEFAULT '[]';
ALTER TABLE client_keys ADD COLUMN allowed_connections TEXT NOT NULL DEFAULT '[]';
