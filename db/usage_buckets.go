package db

import (
	"context"
	"fmt"
)

// UsageBucket is one row of usage_buckets: a quarter hour's use by one client key of one
// provider's model on one connection.
type UsageBucket struct {
	Bucket           int64   `db:"bucket"` // unix seconds / 900
	KeyID            int64   `db:"key_id"`
	Provider         string  `db:"provider"`
	Model            string  `db:"model"`
	ConnectionID     int64   `db:"connection_id"`
	Requests         int64   `db:"requests"`
	Errors           int64   `db:"errors"`
	InputTokens      int64   `db:"input_tokens"`
	OutputTokens     int64   `db:"output_tokens"`
	CacheReadTokens  int64   `db:"cache_read_tokens"`
	CacheWriteTokens int64   `db:"cache_write_tokens"`
	ReasoningTokens  int64   `db:"reasoning_tokens"`
	CostUSD          float64 `db:"cost_usd"`
	// Unpriced counts the requests whose model had no price (their cost is not in CostUSD).
	Unpriced int64 `db:"unpriced"`
}

// UsageBucketSeconds is the length of a bucket.
const UsageBucketSeconds = 900

const usageCols = `bucket, key_id, provider, model, connection_id, requests, errors, input_tokens, output_tokens,
	cache_read_tokens, cache_write_tokens, reasoning_tokens, cost_usd, unpriced`

// AddUsageBuckets adds sums to the stored buckets with the same bucket, key, provider, model and
// connection (creating those that do not exist): replicas sharing a store each add what they
// counted.
func AddUsageBuckets(ctx context.Context, q Querier, rows []UsageBucket) error {
	for _, r := range rows {
		if _, err := q.ExecContext(ctx, `INSERT INTO usage_buckets (`+usageCols+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (bucket, key_id, provider, model, connection_id) DO UPDATE SET
			requests = usage_buckets.requests + excluded.requests, errors = usage_buckets.errors + excluded.errors,
			input_tokens = usage_buckets.input_tokens + excluded.input_tokens,
			output_tokens = usage_buckets.output_tokens + excluded.output_tokens,
			cache_read_tokens = usage_buckets.cache_read_tokens + excluded.cache_read_tokens,
			cache_write_tokens = usage_buckets.cache_write_tokens + excluded.cache_write_tokens,
			reasoning_tokens = usage_buckets.reasoning_tokens + excluded.reasoning_tokens,
			cost_usd = usage_buckets.cost_usd + excluded.cost_usd, unpriced = usage_buckets.unpriced + excluded.unpriced`,
			r.Bucket, r.KeyID, r.Provider, r.Model, r.ConnectionID, r.Requests, r.Errors, r.InputTokens, r.OutputTokens,
			r.CacheReadTokens, r.CacheWriteTokens, r.ReasoningTokens, r.CostUSD, r.Unpriced); err != nil {
			return fmt.Errorf("add usage bucket %d: %w", r.Bucket, err)
		}
	}
	return nil
}

// UpsertUsageBuckets writes buckets, replacing the stored ones with the same bucket, key,
// provider, model and connection (the caller holds the whole bucket's sums).
func UpsertUsageBuckets(ctx context.Context, q Querier, rows []UsageBucket) error {
	for _, r := range rows {
		if _, err := q.ExecContext(ctx, `INSERT INTO usage_buckets (`+usageCols+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (bucket, key_id, provider, model, connection_id) DO UPDATE SET
			requests = excluded.requests, errors = excluded.errors, input_tokens = excluded.input_tokens,
			output_tokens = excluded.output_tokens, cache_read_tokens = excluded.cache_read_tokens,
			cache_write_tokens = excluded.cache_write_tokens, reasoning_tokens = excluded.reasoning_tokens,
			cost_usd = excluded.cost_usd, unpriced = excluded.unpriced`,
			r.Bucket, r.KeyID, r.Provider, r.Model, r.ConnectionID, r.Requests, r.Errors, r.InputTokens, r.OutputTokens,
			r.CacheReadTokens, r.CacheWriteTokens, r.ReasoningTokens, r.CostUSD, r.Unpriced); err != nil {
			return fmt.Errorf("upsert usage bucket %d: %w", r.Bucket, err)
		}
	}
	return nil
}

// ListUsageBuckets returns every bucket in [from, to) (bucket numbers), oldest first.
func ListUsageBuckets(ctx context.Context, q Querier, from, to int64) ([]UsageBucket, error) {
	return selectRows[UsageBucket](ctx, q, "list usage buckets", `SELECT `+usageCols+` FROM usage_buckets
		WHERE bucket >= ? AND bucket < ? ORDER BY bucket`, from, to)
}

// KeySpend is one client key's spend from a bucket on.
type KeySpend struct {
	KeyID   int64   `db:"key_id"`
	CostUSD float64 `db:"cost_usd"`
}

// SumKeySpend sums each client key's cost from bucket from on.
func SumKeySpend(ctx context.Context, q Querier, from int64) ([]KeySpend, error) {
	return selectRows[KeySpend](ctx, q, "sum key spend",
		`SELECT key_id, SUM(cost_usd) AS cost_usd FROM usage_buckets
		WHERE bucket >= ? GROUP BY key_id`, from)
}

// PruneUsageBuckets deletes the buckets before bucket before.
func PruneUsageBuckets(ctx context.Context, q Querier, before int64) error {
	if _, err := q.ExecContext(ctx, `DELETE FROM usage_buckets WHERE bucket < ?`, before); err != nil {
		return fmt.Errorf("prune usage buckets: %w", err)
	}
	return nil
}
