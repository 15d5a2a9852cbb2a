package settings

import "testing"

func TestStatusMatcher(t *testing.T) {
	tests := []struct {
		name     string
		patterns []string
		match    []int
		noMatch  []int
	}{
		{"retry defaults", []string{"429", "502", "503", "504", "522", "524"}, []int{429, 502, 524}, []int{500, 501, 505, 428, 200}},
		{"class", []string{"429", "5xx"}, []int{429, 500, 550, 599}, []int{499, 600, 400, 0, -1, 1000}},
		{"1xx boundary", []string{"1xx"}, []int{100, 199}, []int{99, 200}},
		{"empty", []string{}, nil, []int{429, 500}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := NewStatusMatcher(tt.patterns)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tt.match {
				if !m.Match(s) {
					t.Errorf("Match(%d) = false", s)
				}
			}
			for _, s := range tt.noMatch {
				if m.Match(s) {
					t.Errorf("Match(%d) = true", s)
				}
			}
		})
	}
}

func TestStatusMatcherRejectsBadPatterns(t *testing.T) {
	for _, p := range []string{"", "42", "4290", "600", "099", "6xx", "0xx", "5XX", "5x", "x29", "+42", "4 9"} {
		t.Run(p, func(t *testing.T) {
			if _, err := NewStatusMatcher([]string{"429", p}); err == nil {
				t.Errorf("%q accepted", p)
			}
		})
	}
}

func TestNilMatcherMatchesNothing(t *testing.T) {
	var m *StatusMatcher
	if m.Match(500) {
		t.Error("nil matcher matched")
	}
}

func TestSnapshotCachesMatchers(t *testing.T) {
	s := newService(t, NewMemoryStore(), map[string]string{"SWITCHYARD_RETRY_RETRY_ON_STATUSES": "408,5xx"})
	snap := s.Snapshot()
	if !snap.RetryOn().Match(408) || !snap.RetryOn().Match(501) || snap.RetryOn().Match(429) {
		t.Error("retry matcher does not follow retry_on_statuses")
	}
	if !snap.FailureOn().Match(429) || !snap.FailureOn().Match(503) || snap.FailureOn().Match(404) {
		t.Error("failure matcher does not follow failure_on_statuses")
	}
}

func BenchmarkStatusMatcher(b *testing.B) {
	m, _ := NewStatusMatcher([]string{"429", "5xx"})
	for i := 0; b.Loop(); i++ {
		_ = m.Match(400 + i%200)
	}
}
