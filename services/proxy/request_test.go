package proxy

import (
	"encoding/json"
	"testing"

	"github.com/tidwall/gjson"
)

// The body an upstream of the client's format gets: its model named, and a chat stream without
// stream_options asking for the usage, in one copy; a body that needs neither is the client's.
func TestForUpstream(t *testing.T) {
	for _, c := range []struct {
		body, model string
		usage, same bool
	}{
		{`{"model":"m","stream":true}`, "m", false, true},
		{`{"model":"m","stream":true}`, "up-m", false, false},
		{`{"model":"m","stream":true}`, "m", true, false},
		{`{"stream":true,"model":"m","messages":[{"role":"user","content":"}"}]}`, "up-m", true, false},
		{`{"stream":true}`, "up-m", true, false},
	} {
		req, derr := DecodeRequest([]byte(c.body))
		if derr != nil && c.body != `{"stream":true}` {
			t.Fatal(derr)
		}
		body := req.Body
		if derr != nil {
			body = []byte(c.body)
		}
		out, err := forUpstream(body, c.model, c.usage)
		if err != nil || !json.Valid(out) || gjson.GetBytes(out, "model").String() != c.model ||
			gjson.GetBytes(out, "stream_options.include_usage").Bool() != c.usage || gjson.GetBytes(out, "stream").Bool() != true {
			t.Fatalf("%s for %s, usage %v: %s %v", c.body, c.model, c.usage, out, err)
		}
		if same := &out[0] == &body[0]; same != c.same {
			t.Fatalf("%s for %s, usage %v: the client's body %v, want %v", c.body, c.model, c.usage, same, c.same)
		}
		if m := gjson.Get(c.body, "messages"); gjson.GetBytes(out, "messages").Raw != m.Raw {
			t.Fatalf("the messages changed: %s", out)
		}
	}
	req, _ := DecodeRequest([]byte(` {"model":"m","stream_options":{"include_usage":false}} `))
	if req.StreamOptions != `{"include_usage":false}` {
		t.Fatalf("stream_options read as %q", req.StreamOptions)
	}
}
