package main

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// layers is the dependency direction of the code (see the layout in the README): a package may
// import only packages of its own layer's allowed set. Left imports right, never back.
var layers = []struct {
	name    string
	match   func(pkg string) bool
	allowed []string // layer names this one may import
}{
	{"main", func(p string) bool { return p == "" }, []string{"app"}},
	{"app", prefix("app"), []string{"web", "handlers", "services", "views", "static", "db", "i18n"}},
	{"web", prefix("web"), []string{"handlers", "services", "views", "static", "i18n"}},
	{"handlers", prefix("handlers"), []string{"services", "views", "i18n"}},
	{"views", prefix("views"), []string{"i18n"}},
	{"services", prefix("services"), []string{"services", "db", "i18n"}},
	{"db", prefix("db"), []string{"migrations"}},
	{"migrations", prefix("migrations"), nil},
	{"i18n", prefix("i18n"), nil},
	{"static", prefix("static"), nil},
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

// TestDependencyDirection reads every non-test Go file of the module and fails on an import
// against the direction, naming the file and the import.
func TestDependencyDirection(t *testing.T) {
	const module = "switchyard"
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
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
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		pkg := filepath.ToSlash(filepath.Dir(path))
		if pkg == "." {
			pkg = ""
		}
		from := layerOf(pkg)
		if from == "" {
			t.Errorf("%s: package %q belongs to no layer; add it to the layers table", path, pkg)
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			target, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range foreign[from] {
				if target == bad || strings.HasPrefix(target, bad+"/") {
					t.Errorf("%s: %s imports %s, which that layer must not use", path, from, target)
				}
			}
			if target != module && !strings.HasPrefix(target, module+"/") {
				continue
			}
			to := layerOf(strings.TrimPrefix(strings.TrimPrefix(target, module), "/"))
			if !allowed(from, to) {
				t.Errorf("%s: %s imports %s (%s → %s points the wrong way)", path, from, target, from, to)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("only %d files checked: the walk missed the tree", checked)
	}
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
	if allowed("services", "handlers") || allowed("handlers", "web") || allowed("views", "services") || allowed("db", "services") {
		t.Fatal("a backward import is allowed")
	}
	if !allowed("handlers", "services") || !allowed("app", "web") {
		t.Fatal("a forward import is refused")
	}
}
