package proxy

import (
	"testing"
)

func TestUpstreamStreamErrorsInOpenAIShape(t *testing.T) {
	tests := []struct {
		name, ev, want string
	}{
		{"openai", `data: {"error":{"message":"boom","type":"server_error","code":"server_error"}}`,
			`{"error":{"message":"boom","type":"server_error","code":"server_error","param":null}}`},
		{"param kept", `data: {"error":{"message":"bad","type":"invalid_request_error","code":null,"param":"tools"}}`,
			`{"error":{"message":"bad","type":"invalid_request_error","code":null,"param":"tools"}}`},
		{"numeric code and no type", `data: {"error":{"message":"hidden failure","code":500}}`,
			`{"error":{"message":"hidden failure","type":"upstream_error","code":null,"param":null}}`},
		{"error as text", `data: {"error":"upstream went away"}`,
			`{"error":{"message":"upstream went away","type":"upstream_error","code":null,"param":null}}`},
		{"google", `data: {"error":{"code":429,"message":"Resource exhausted","status":"RESOURCE_EXHAUSTED"}}`,
			`{"error":{"message":"Resource exhausted","type":"RESOURCE_EXHAUSTED","code":null,"param":null}}`},
		{"crlf and no space", "data:{\"error\":{\"message\":\"x\",\"type\":\"t\",\"code\":\"c\"}}\r\n\r\n",
			`{"error":{"message":"x","type":"t","code":"c","param":null}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !isChatError([]byte(tt.ev)) {
				t.Fatal("not recognised as an error event")
			}
			if got := string(appendOpenAIStreamError(nil, []byte(tt.ev))); got != "data: "+tt.want+"\n\n" {
				t.Fatalf("got  %q\nwant %q", got, "data: "+tt.want+"\n\n")
			}
		})
	}
}

func TestStreamErrorRecognition(t *testing.T) {
	tests := []struct {
		name        string
		ev          string
		chat, named bool
	}{
		{"chat content about errors", `data: {"choices":[{"index":0,"delta":{"content":"an \"error\": none"}}]}`, false, false},
		{"chat finish_reason error", `data: {"choices":[{"index":0,"delta":{},"finish_reason":"error"}]}`, false, false},
		{"chat error", `data: {"error":{"message":"x"}}`, true, false},
		{"anthropic error event", "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}", true, true},
		{"anthropic text about errors", "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"error\"}}", false, false},
		{"responses error without a name", `data: {"type":"error","code":"server_error","message":"x","sequence_number":3}`, true, true},
		{"responses failed is terminal, not an error event", "event: response.failed\ndata: {\"type\":\"response.failed\"}", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isChatError([]byte(tt.ev)); got != tt.chat {
				t.Errorf("isChatError = %v", got)
			}
			if got := lookEvent(FormatChat, []byte(tt.ev)).errorEv; got != tt.chat {
				t.Errorf("chat look: error event = %v", got)
			}
			for _, f := range []Format{FormatMessages, FormatResponses} {
				if got := lookEvent(f, []byte(tt.ev)).errorEv; got != tt.named {
					t.Errorf("%v look: error event = %v", f, got)
				}
			}
		})
	}
}
