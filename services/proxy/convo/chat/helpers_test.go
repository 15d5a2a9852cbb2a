package chat

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files from the current output")

// golden compares got with the golden file at path, or rewrites it with -update (or writes it
// when it is missing, outside CI).
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	want, err := os.ReadFile(path)
	if *update || os.IsNotExist(err) && os.Getenv("CI") != "true" {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs (run go test -update to accept)\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

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
			golden(t, strings.TrimSuffix(f, ext)+".golden", fn(t, in))
		})
	}
}

func indent(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	out.WriteByte('\n')
	return out.Bytes()
}

// splitEvents cuts an SSE document into its events.
func splitEvents(doc []byte) [][]byte {
	var out [][]byte
	for _, ev := range bytes.Split(doc, []byte("\n\n")) {
		if len(bytes.TrimSpace(ev)) > 0 {
			out = append(out, append(ev, '\n', '\n'))
		}
	}
	return out
}

func mustJSON(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}
