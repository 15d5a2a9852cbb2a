package spend

import (
	"math"
	"testing"
)

func TestPriceCost(t *testing.T) {
	sonnet := Price{InputPerMTok: 3, OutputPerMTok: 15, CacheWritePerMTok: 3.75, CacheReadPerMTok: 0.3,
		InputAbove200kPerMTok: 6, OutputAbove200kPerMTok: 22.5}
	gpt := Price{InputPerMTok: 2, OutputPerMTok: 8, CacheReadPerMTok: 0.5}
	flat := Price{InputPerMTok: 1, OutputPerMTok: 2}
	for _, c := range []struct {
		name  string
		price Price
		use   Usage
		want  float64
	}{
		{"plain", sonnet, Usage{Input: 100_000, Output: 100_000}, 0.3 + 1.5},
		{"cache tokens at their prices", sonnet,
			Usage{Input: 100_000, CacheRead: 40_000, CacheWrite: 10_000, Output: 10_000},
			(50_000*3 + 40_000*0.3 + 10_000*3.75 + 10_000*15) / 1e6},
		{"reasoning is part of the output, billed once", sonnet,
			Usage{Input: 1000, Output: 2000, Reasoning: 1500}, (1000*3 + 2000*15) / 1e6},
		{"at 200,000 the plain prices hold", sonnet, Usage{Input: 200_000, Output: 1000}, (200_000*3 + 1000*15) / 1e6},
		{"past 200,000 the long-prompt prices hold for the whole request", sonnet,
			Usage{Input: 300_000, Output: 1000}, (300_000*6 + 1000*22.5) / 1e6},
		// Anthropic doubles the cache prices with the input price: 7.50 and 0.60.
		{"long prompt with cache tokens", sonnet,
			Usage{Input: 500_000, CacheRead: 250_000, CacheWrite: 50_000, Output: 2000},
			(200_000*6 + 250_000*0.6 + 50_000*7.5 + 2000*22.5) / 1e6},
		{"the prompt counts cache tokens toward 200,000", sonnet,
			Usage{Input: 210_000, CacheRead: 200_000, Output: 0}, (10_000*6 + 200_000*0.6) / 1e6},
		{"no cache write price: the input price", gpt,
			Usage{Input: 1_000_000, CacheWrite: 500_000, CacheRead: 250_000}, 0.25*2 + 0.5*2 + 0.25*0.5},
		{"no tier: a long prompt costs the plain price", gpt, Usage{Input: 1_000_000}, 2},
		{"no cache prices at all", flat, Usage{Input: 10, CacheRead: 5, CacheWrite: 5, Output: 10}, (10*1 + 10*2) / 1e6},
		{"more cache than prompt bills no negative tokens", flat, Usage{Input: 10, CacheRead: 20}, 20 * 1 / 1e6},
		{"free", Price{}, Usage{Input: 1_000_000, Output: 1_000_000}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.price.Cost(c.use); math.Abs(got-c.want) > 1e-12 {
				t.Fatalf("cost %.12f, want %.12f", got, c.want)
			}
		})
	}
}

func TestUsage(t *testing.T) {
	u := Usage{Input: 10, Output: 5, CacheRead: 3, CacheWrite: 2, Reasoning: 1}
	u.Add(Usage{Input: 1, Output: 1, CacheRead: 1, CacheWrite: 1, Reasoning: 1})
	if u != (Usage{Input: 11, Output: 6, CacheRead: 4, CacheWrite: 3, Reasoning: 2}) || u.Total() != 17 || u.Uncached() != 4 {
		t.Fatalf("%+v total %d uncached %d", u, u.Total(), u.Uncached())
	}
}

// Every built-in price can bill: the table's own long-prompt entries cost more past 200,000.
func TestBuiltInLongPrompt(t *testing.T) {
	p, _, ok := table(t, nil).Lookup("gemini", "openai-compatible", "gemini-pro-latest")
	if !ok {
		t.Fatal("gemini-pro-latest has no price")
	}
	short, long := p.Cost(Usage{Input: 200_000}), p.Cost(Usage{Input: 200_001})
	if long < 1.9*short {
		t.Fatalf("200,000 tokens cost %v, 200,001 cost %v", short, long)
	}
}
