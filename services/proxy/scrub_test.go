package proxy

import (
	"strings"
	"testing"
)

func TestScrubRemovesSecrets(t *testing.T) {
	cases := map[string]string{
		"Invalid request with key sk-proj-AbCdEf0123456789xyz please":      "Invalid request with key [redacted] please",
		`{"error":"bad key sk-ant-api03-AAAABBBBCCCCDDDD_eeee"}`:           `{"error":"bad key [redacted]"}`,
		"google key AIzaSyA1234567890abcdefghijklmnopqrstuv":               "google key [redacted]",
		"Authorization: Bearer abcdefghijklmnop.qrs":                       "Authorization: [redacted]",
		"groq gsk_abcdefghijklmnopqrstuvwx and xai-abcdefghijklmnopqrstuv": "groq [redacted] and [redacted]",
		"nothing secret here, a skeleton key and sk- alone":                "nothing secret here, a skeleton key and sk- alone",
	}
	for in, want := range cases {
		if got := scrub(in, nil); got != want {
			t.Errorf("scrub(%q)\n got %q\nwant %q", in, got, want)
		}
	}
}

func TestDuplicateKey(t *testing.T) {
	for body, want := range map[string]string{
		`{"model":"a","model":"b"}`:                              "model",
		`{"stream":false,"x":{"stream":1},"stream":true}`:        "stream",
		`{"model":"a","messages":[{"model":"x"},{"model":"y"}]}`: "",
		`{"a":1,"b":2}`: "",
	} {
		if got := duplicateKey([]byte(body)); got != want {
			t.Errorf("duplicateKey(%s) = %q, want %q", body, got, want)
		}
	}
	if _, err := DecodeRequest([]byte(`{"model":"sim/sim-small","model":"other-model"}`)); err == nil || err.ReasonCode() != "duplicate_key" {
		t.Fatalf("a duplicated model was accepted: %v", err)
	}
	if !strings.Contains(errInvalid("x", "proxy.duplicate_key", "model").Error(), "model") {
		t.Fatal("the message does not name the field")
	}
}
