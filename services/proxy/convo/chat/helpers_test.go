package chat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"switchyard/services/proxy/convo/convotest"
	"testing"
)

// cases runs fn over every input file of a testdata directory; what fn returns is compared with
// the file's .golden twin.
func cases(t *testing.T, dir, ext string, fn func(t *testing.T, in []byte) []byte) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", dir, "*"+ext))
	if err != nil || len(files) == 0 {
		t.Fatalf("no cases in testdata/%s", dir)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ext)
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			convotest.Golden(t, strings.TrimSuffix(f, ext)+".golden", fn(t, in))
		})
	}
}

func mustJSON(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}
