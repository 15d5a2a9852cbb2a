package main

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/types"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"

	"switchyard/i18n"
)

// verb is a formatting verb of a catalog text. A text with a percent sign that is no verb ("80 %
// and 100 %") is plain text and is only ever used without arguments.
var verb = regexp.MustCompile(`%[-+# 0]*[0-9]*(?:\.[0-9]+)?[bcdeEfFgGoOqstTvxX]`)

// TestMessagesMatchTheCatalogs reads every call in the code that passes a catalog key and the
// arguments of its format (errs.M, errs.New, errs.Wrap, errs.Field, i18n.T and every helper of
// that shape: a parameter named key followed by args ...any) and, where the key is a constant,
// checks that both catalogs have it and, where arguments are given, that each language's text
// has as many verbs as the call has arguments and that a number verb gets a number. The
// services cannot check their own keys (they do not import the catalogs), so this test does,
// for them and the edge alike.
func TestMessagesMatchTheCatalogs(t *testing.T) {
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedTypes | packages.NeedSyntax | packages.NeedTypesInfo}
	pkgs, err := packages.Load(cfg, "./services/...", "./handlers/...", "./web/...", "./views/...", "./app/...")
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	for _, p := range pkgs {
		for _, e := range p.Errors {
			t.Fatalf("%s: %v", p.PkgPath, e)
		}
		for _, f := range p.Syntax {
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				key, args, ok := messageCall(p.TypesInfo, call)
				if !ok {
					return true
				}
				calls++
				at := p.Fset.Position(call.Pos())
				for _, l := range i18n.Langs {
					for _, problem := range messageProblems(l, key, args, p.TypesInfo) {
						t.Errorf("%s: %s", at, problem)
					}
				}
				return true
			})
		}
	}
	if calls < 300 {
		t.Fatalf("only %d calls with a constant key found: the scan missed the code", calls)
	}
}

// messageCall recognises a call that passes a constant catalog key and its arguments: the
// callee's last parameters are key string and args ...any, and the call does not spread a slice
// into args (those are forwarded by a helper whose own callers are checked).
func messageCall(info *types.Info, call *ast.CallExpr) (key string, args []ast.Expr, ok bool) {
	sig, isSig := info.TypeOf(call.Fun).(*types.Signature)
	if !isSig || !sig.Variadic() || call.Ellipsis.IsValid() {
		return "", nil, false
	}
	ps := sig.Params()
	k := ps.Len() - 2
	if k < 0 || ps.At(k).Name() != "key" || !types.Identical(ps.At(k).Type(), types.Typ[types.String]) || k >= len(call.Args) {
		return "", nil, false
	}
	v := info.Types[call.Args[k]].Value
	if v == nil || v.Kind() != constant.String {
		return "", nil, false
	}
	return constant.StringVal(v), call.Args[k+1:], true
}

// messageProblems lists what is wrong with a key and its arguments in one language.
func messageProblems(l i18n.Lang, key string, args []ast.Expr, info *types.Info) []string {
	if !i18n.Has(l, key) {
		return []string{fmt.Sprintf("%s lacks %q", l, key)}
	}
	if len(args) == 0 {
		return nil // the text is shown as it is
	}
	text := i18n.TL(l, key)
	verbs := verb.FindAllString(strings.ReplaceAll(text, "%%", ""), -1)
	if len(verbs) != len(args) {
		return []string{fmt.Sprintf("%s %q has %d verbs for %d arguments: %q", l, key, len(verbs), len(args), text)}
	}
	var out []string
	for i, v := range verbs {
		b, basic := info.TypeOf(args[i]).Underlying().(*types.Basic)
		if !basic {
			continue // a message, a Stringer, an error or an interface: fmt writes them with any verb
		}
		var fits bool
		switch v[len(v)-1] {
		case 'd':
			fits = b.Info()&types.IsInteger != 0
		case 'e', 'E', 'f', 'F', 'g', 'G':
			fits = b.Info()&types.IsFloat != 0
		case 's', 'q':
			fits = b.Info()&types.IsString != 0
		default:
			fits = true
		}
		if !fits {
			out = append(out, fmt.Sprintf("%s %q: argument %d has type %s, unfit for %s", l, key, i+1, b, v))
		}
	}
	return out
}
