package handlers

import "testing"

func TestSafeNext(t *testing.T) {
	for in, want := range map[string]string{"/providers": "/providers", "//evil.example": "/", "https://evil.example/": "/",
		"/\\evil": "/", "": "/", "/keys?x=1": "/keys?x=1"} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}
