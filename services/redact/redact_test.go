package redact

import (
	"net/url"
	"testing"
)

func TestStringRemovesSecrets(t *testing.T) {
	cases := []struct {
		name, in, want string
		secrets        []string
	}{
		{"openai key", "Invalid request with key sk-proj-AbCdEf0123456789xyz please", "Invalid request with key [redacted] please", nil},
		{"anthropic key in json", `{"error":"bad key sk-ant-api03-AAAABBBBCCCCDDDD_eeee"}`, `{"error":"bad key [redacted]"}`, nil},
		{"google key", "google key AIzaSyA1234567890abcdefghijklmnopqrstuv", "google key [redacted]", nil},
		{"bearer token", "Authorization: Bearer abcdefghijklmnop.qrs", "Authorization: [redacted]", nil},
		{"groq and xai", "groq gsk_abcdefghijklmnopqrstuvwx and xai-abcdefghijklmnopqrstuv", "groq [redacted] and [redacted]", nil},
		{"lease owner token", `{"owner":"swl_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_abcde"}`, `{"owner":"[redacted]"}`, nil},
		{"client key", "your key sk-sy-AbCdEfGhIjKlMnOp_qrstuv-wxyz is wrong", "your key [redacted] is wrong", nil},
		{"nothing secret", "nothing secret here, a skeleton key and sk- alone", "nothing secret here, a skeleton key and sk- alone", nil},
		{"a named secret of any shape", "token tok.ABC123xyz was refused", "token [redacted] was refused", []string{"tok.ABC123xyz"}},
		{"several named secrets", "a=first-one b=second-one", "a=[redacted] b=[redacted]", []string{"first-one", "", "second-one"}},
		{"a short credential inside words stays", "the word abcdef and xabc stay", "the word abcdef and xabc stay", []string{"abc"}},
		{"a short credential as a token goes", `key "abc" refused; abc. (abc) x-abc`, `key "[redacted]" refused; [redacted]. ([redacted]) x-abc`, []string{"abc"}},
		{"a one-character credential", "got k, a k and kk", "got [redacted], a [redacted] and kk", []string{"k"}},
		{"a short credential in a non-ASCII word stays", "abcé and éabc", "abcé and éabc", []string{"abc"}},
		{"openai's masked echo", "Incorrect API key provided: sk-abc*****wxyz. You can find your API key at …",
			"Incorrect API key provided: [redacted]. You can find your API key at …", nil},
		{"a long masked project key", "key sk-proj-********************************abcd is wrong", "key [redacted] is wrong", nil},
		{"a masked echo of a named key", "Your api key: ****0042 is invalid; and loca*****0042.", "Your api key: [redacted] is invalid; and [redacted].",
			[]string{"local.vllm.token.0042"}},
		{"a masked echo of a short key", "key a***c refused", "key [redacted] refused", []string{"abc"}},
		{"masks of something else stay", "rated ***** by f***ing users; **bold** and zz***zz", "rated ***** by f***ing users; **bold** and zz***zz",
			[]string{"local.vllm.token.0042"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := String(tc.in, tc.secrets...); got != tc.want {
				t.Errorf("String(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
			if got := string(Bytes([]byte(tc.in), tc.secrets...)); got != tc.want {
				t.Errorf("Bytes(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestBytesKeepsACleanBody(t *testing.T) {
	b := []byte(`{"choices":[{"delta":{"content":"hello"}}]}`)
	if got := Bytes(b, "sk-a-SECRET-0123456789"); &got[0] != &b[0] {
		t.Fatal("a body without secrets was copied")
	}
}

func TestFieldsRemovesSecretValues(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"api_key", `{"api_key":"abc123","model":"m"}`, `{"api_key":"[redacted]","model":"m"}`},
		{"names in other spellings", `{"apiKey": "a", "x-api-key":"b", "client_secret" : "c", "Authorization":"Basic d"}`,
			`{"apiKey": "[redacted]", "x-api-key":"[redacted]", "client_secret" : "[redacted]", "Authorization":"[redacted]"}`},
		{"tokens and password", `{"access_token":"a\"b","refresh_token":"r","password":"p w"}`,
			`{"access_token":"[redacted]","refresh_token":"[redacted]","password":"[redacted]"}`},
		{"a value cut off", `{"model":"m","password":"hunter2 and mo`, `{"model":"m","password":"[redacted]"`},
		{"other fields stay", `{"max_tokens":5,"content":"my password is long","secretary":1}`,
			`{"max_tokens":5,"content":"my password is long","secretary":1}`},
		{"a name inside a text stays", `{"content":"say \"password\": \"x\""}`, `{"content":"say \"password\": \"x\""}`},
		{"non-string values stay", `{"api_key":null,"secret":true}`, `{"api_key":null,"secret":true}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Fields(tc.in); got != tc.want {
				t.Errorf("Fields(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestBytesKeepsATextWithShortSecretsInWords(t *testing.T) {
	b := []byte(`{"content":"abcdef is a word"}`)
	if got := Bytes(b, "abc"); &got[0] != &b[0] {
		t.Fatal("a body with nothing to remove was copied")
	}
}

func TestRedirectTargets(t *testing.T) {
	from, _ := url.Parse("https://api.example.com/v1/chat/completions")
	cases := []struct{ name, loc, want string }{
		{"absolute", "https://other.example.net/v1/chat/completions", "https://other.example.net/v1/chat/completions"},
		{"relative", "/elsewhere", "https://api.example.com/elsewhere"},
		{"user info", "http://admin:hunter2@10.0.0.1:8080/x", "http://10.0.0.1:8080/x"},
		{"query and fragment", "https://x.test/cb?code=abc123&state=s1&flag#tok", "https://x.test/cb?code=[redacted]&state=[redacted]&[redacted]#[redacted]"},
		{"a credential in the path", "https://x.test/keys/sk-proj-SECRET0123456789/use", "https://x.test/keys/[redacted]/use"},
		{"a named credential in the path", "https://x.test/k/plain.key.value", "https://x.test/k/[redacted]"},
		{"unreadable", "http://[::1%zz/", "[redacted]"},
		{"none", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Redirect(from, tc.loc, "plain.key.value"); got != tc.want {
				t.Errorf("Redirect(%q) = %q, want %q", tc.loc, got, tc.want)
			}
		})
	}
}
