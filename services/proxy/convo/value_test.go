package convo

import "testing"

func TestOpenAIErrorType(t *testing.T) {
	for in, want := range map[string]string{
		"invalid_request_error": "invalid_request_error", "authentication_error": "authentication_error",
		"permission_error": "permission_error", "rate_limit_error": "rate_limit_error",
		"not_found_error": "invalid_request_error", "request_too_large": "invalid_request_error",
		"api_error": "server_error", "overloaded_error": "server_error", "billing_error": "server_error",
		"timeout_error": "", "server_error": "", "": "",
	} {
		got, ok := OpenAIErrorType(in)
		if got != want || ok != (want != "") {
			t.Errorf("OpenAIErrorType(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

func TestReadHelpers(t *testing.T) {
	for raw, want := range map[string]byte{"": 0, `"x"`: '"', "-1": '0', "7": '0', "true": 't', "false": 't', "null": 'n', "{}": '{', "[]": '['} {
		if got := Kind(raw); got != want {
			t.Errorf("Kind(%q) = %q, want %q", raw, got, want)
		}
	}
	if !Is("", '"') || !Is("null", '"') || Is("1", '"') || !Is("1", '"', '0') {
		t.Error("Is: absent and null are every kind's, others only their own")
	}
	for raw, want := range map[string]bool{"1": false, "1.5": true, "1e3": true, "99999999999999999999": true, `"1.5"`: false, "": false} {
		if got := NotInt(raw); got != want {
			t.Errorf("NotInt(%q) = %v, want %v", raw, got, want)
		}
	}
	model, user, metadata := `"m"`, "3", "[]"
	name, what, bad := BadKind([]FieldSlot{Field("model", &model).Want('"', "a string"),
		Field("user", &user).Want('"', "a string"), Field("metadata", &metadata).Want('{', "an object")})
	if !bad || name != "user" || what != "a string" {
		t.Errorf("BadKind = %q, %q, %v, want the first mistyped field, user", name, what, bad)
	}
	for u, want := range map[string][2]string{"data:image/png;base64,AAAA": {"image/png", "AAAA"}, "data:;base64,AA": {}, "data:image/png,AA": {}, "https://x/y.png": {}} {
		mt, data, ok := ParseDataURL(u)
		if mt != want[0] || data != want[1] || ok != (want[0] != "") {
			t.Errorf("ParseDataURL(%q) = %q, %q, %v", u, mt, data, ok)
		}
	}
	for budget, want := range map[int]string{0: "low", 4095: "low", 4096: "medium", 16383: "medium", 16384: "high"} {
		if got := EffortOf(budget); got != want {
			t.Errorf("EffortOf(%d) = %q, want %q", budget, got, want)
		}
	}
}
