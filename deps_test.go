package main

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// layers is the dependency direction of the code (see the layout in the README): a package may
// import only packages of its own layer's allowed set. Left imports right, never back. The
// domain knows no catalog: services carry message keys and arguments, and the edge (web,
// handlers, views) writes them in a language, so services may not import i18n, not even in
// their tests (tests is true: the layer's _test.go files obey the same rule).
var layers = []struct {
	name    string
	match   func(pkg string) bool
	allowed []string // layer names this one may import
	tests   bool     // whether the layer's test files are held to allowed too
}{
	{"main", func(p string) bool { return p == "" }, []string{"app"}, false},
	{"app", prefix("app"), []string{"web", "handlers", "services", "views", "static", "db", "i18n"}, false},
	{"web", prefix("web"), []string{"handlers", "services", "views", "static", "i18n"}, false},
	{"handlers", prefix("handlers"), []string{"services", "views", "i18n"}, false},
	{"views", prefix("views"), []string{"i18n"}, false},
	{"services", prefix("services"), []string{"services", "db"}, true},
	{"db", prefix("db"), []string{"db", "migrations"}, false}, // db/dbtest opens the store for other packages' tests
	{"migrations", prefix("migrations"), nil, false},
	{"i18n", prefix("i18n"), nil, false},
	{"static", prefix("static"), nil, false},
}

// foreign are third-party packages a layer must not use: the domain stays free of HTTP
// framework and template types.
var foreign = map[string][]string{
	"services": {"github.com/labstack/echo", "github.com/a-h/templ"},
	"db":       {"github.com/labstack/echo", "github.com/a-h/templ"},
	"views":    {"github.com/labstack/echo"},
}

func prefix(p string) func(string) bool {
	return func(pkg string) bool { return pkg == p || strings.HasPrefix(pkg, p+"/") }
}

func layerOf(pkg string) string {
	for _, l := range layers {
		if l.match(pkg) {
			return l.name
		}
	}
	return ""
}

// TestDependencyDirection reads every Go file of the module (the test files of the layers that
// hold their tests to the rule) and fails on an import against the direction, naming the file
// and the import.
func TestDependencyDirection(t *testing.T) {
	bad, checked, err := importViolations(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Error(b)
	}
	if checked < 50 {
		t.Fatalf("only %d files checked: the walk missed the tree", checked)
	}
}

// importViolations walks the module at root and lists every import against the direction.
func importViolations(root string) (bad []string, checked int, err error) {
	const module = "switchyard"
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "node_modules", ".git", "e2e", "bench", "data", "bin", "docs":
				return filepath.SkipDir // tests and the harness may import anything
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(rel))
		if pkg == "." {
			pkg = ""
		}
		from := layerOf(pkg)
		if from == "" {
			bad = append(bad, fmt.Sprintf("%s: package %q belongs to no layer; add it to the layers table", rel, pkg))
			return nil
		}
		if strings.HasSuffix(path, "_test.go") && !testsChecked(from) {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			target, _ := strconv.Unquote(imp.Path.Value)
			for _, no := range foreign[from] {
				if target == no || strings.HasPrefix(target, no+"/") {
					bad = append(bad, fmt.Sprintf("%s: %s imports %s, which that layer must not use", rel, from, target))
				}
			}
			if target != module && !strings.HasPrefix(target, module+"/") {
				continue
			}
			to := layerOf(strings.TrimPrefix(strings.TrimPrefix(target, module), "/"))
			if !allowed(from, to) {
				bad = append(bad, fmt.Sprintf("%s: %s imports %s (%s → %s points the wrong way)", rel, from, target, from, to))
			}
		}
		return nil
	})
	return bad, checked, err
}

func testsChecked(layer string) bool {
	for _, l := range layers {
		if l.name == layer {
			return l.tests
		}
	}
	return false
}

func allowed(from, to string) bool {
	for _, l := range layers {
		if l.name == from {
			for _, a := range l.allowed {
				if a == to {
					return true
				}
			}
		}
	}
	return false
}

// TestDependencyRuleCatchesABackwardImport makes sure the rule can fail: a services file that
// imports handlers is reported.
func TestDependencyRuleCatchesABackwardImport(t *testing.T) {
	if allowed("services", "handlers") || allowed("handlers", "web") || allowed("views", "services") || allowed("db", "services") ||
		allowed("services", "i18n") {
		t.Fatal("a backward import is allowed")
	}
	if !allowed("handlers", "services") || !allowed("app", "web") {
		t.Fatal("a forward import is refused")
	}
}

// TestImportRuleReadsServiceTests makes sure the walk can fail where the domain would learn a
// language: a service and its test that import i18n are both reported, a service importing
// handlers is, and an edge test is left to import what it needs.
func TestImportRuleReadsServiceTests(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"services/quota/quota.go":      "package quota\n\nimport \"switchyard/i18n\"\n\nvar _ = i18n.EN\n",
		"services/quota/quota_test.go": "package quota\n\nimport (\n\t\"testing\"\n\n\t\"switchyard/i18n\"\n)\n",
		"services/quota/back.go":       "package quota\n\nimport \"switchyard/handlers\"\n",
		"services/quota/ok_test.go":    "package quota\n\nimport \"switchyard/db\"\n",
		"web/edge_test.go":             "package web\n\nimport \"switchyard/db\"\n",
		"handlers/text.go":             "package handlers\n\nimport \"switchyard/i18n\"\n",
	}
	for name, src := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bad, _, err := importViolations(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"services/quota/back.go: services imports switchyard/handlers",
		"services/quota/quota.go: services imports switchyard/i18n",
		"services/quota/quota_test.go: services imports switchyard/i18n",
	}
	slices.Sort(bad)
	if len(bad) != len(want) {
		t.Fatalf("reported %q, want %d reports", bad, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(filepath.ToSlash(bad[i]), w) {
			t.Errorf("report %d: %q, want %q…", i, bad[i], w)
		}
	}
}
