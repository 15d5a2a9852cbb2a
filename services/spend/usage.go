// Package spend turns token counts into money and keeps each client key inside its limits:
// the price table (built-in list prices and the operator's overrides), the cost of a request,
// and the per-key limiter (requests and tokens per minute, daily and monthly budgets, parallel
// requests) the edge asks before any upstream call.
package spend

// Usage is the tokens one request used, as the upstream reported them. Input is every prompt
// token, cache reads and writes included; CacheRead and CacheWrite are parts of it. Output is
// every answer token, reasoning included; Reasoning is that part of it.
type Usage struct {
	Input      int64 `json:"input_tokens"`
	Output     int64 `json:"output_tokens"`
	CacheRead  int64 `json:"cache_read_tokens"`
	CacheWrite int64 `json:"cache_write_tokens"`
	Reasoning  int64 `json:"reasoning_tokens"`
}

// Total is the tokens a per-minute token limit counts: input and output.
func (u Usage) Total() int64 { return u.Input + u.Output }

// Uncached is the prompt tokens billed at the plain input price.
func (u Usage) Uncached() int64 {
	n := u.Input - u.CacheRead - u.CacheWrite
	if n < 0 {
		return 0
	}
	return n
}

// Add sums usage.
func (u *Usage) Add(o Usage) {
	u.Input += o.Input
	u.Output += o.Output
	u.CacheRead += o.CacheRead
	u.CacheWrite += o.CacheWrite
	u.Reasoning += o.Reasoning
}

// Price is what a model costs, in USD per million tokens. A zero cache price falls back to
// the input price (a provider that bills cache tokens like any other); the above-200k prices
// apply to the whole request when its prompt exceeds 200,000 tokens, where the provider
// charges so (0 = no such tier). Cache prices rise with the input price in that tier
// (Anthropic and Google double both), so they are scaled by the same factor.
type Price struct {
	InputPerMTok           float64 `json:"input_per_mtok"`
	OutputPerMTok          float64 `json:"output_per_mtok"`
	CacheWritePerMTok      float64 `json:"cache_write_per_mtok,omitempty"`
	CacheReadPerMTok       float64 `json:"cache_read_per_mtok,omitempty"`
	InputAbove200kPerMTok  float64 `json:"input_above_200k_per_mtok,omitempty"`
	OutputAbove200kPerMTok float64 `json:"output_above_200k_per_mtok,omitempty"`
}

// longPrompt is where the above-200k prices start.
const longPrompt = 200_000

// Cost is what usage costs at a price, in USD. Reasoning tokens are part of the output on
// every wire format the gateway speaks, so they are billed with it and not again.
func (p Price) Cost(u Usage) float64 {
	in, out := p.InputPerMTok, p.OutputPerMTok
	cw, cr := p.CacheWritePerMTok, p.CacheReadPerMTok
	if u.Input > longPrompt {
		if p.InputAbove200kPerMTok > 0 {
			in = p.InputAbove200kPerMTok
			if p.InputPerMTok > 0 {
				f := p.InputAbove200kPerMTok / p.InputPerMTok
				cw, cr = cw*f, cr*f
			}
		}
		if p.OutputAbove200kPerMTok > 0 {
			out = p.OutputAbove200kPerMTok
		}
	}
	if cw == 0 {
		cw = in
	}
	if cr == 0 {
		cr = in
	}
	return (float64(u.Uncached())*in + float64(u.CacheWrite)*cw + float64(u.CacheRead)*cr + float64(u.Output)*out) / 1e6
}
