package convo

import (
	"encoding/json"
	"strings"
	"testing"
)

// scanValid is what the one-pass reader thinks of a document whose root is an object.
func scanValid(s string) bool { return Document(s, nil) }

// jsonObject is encoding/json's verdict on the same question.
func jsonObject(s string) bool {
	t := strings.TrimLeft(s, " \t\r\n")
	return json.Valid([]byte(s)) && strings.HasPrefix(t, "{")
}

func TestScanAgreesWithEncodingJSON(t *testing.T) {
	long := strings.Repeat("abcdefgh", 40)
	for _, doc := range []string{
		`{}`, ` { } `, `{"a":1}`, `{"a":-0.5e+10,"b":[1,2,{"c":null}],"d":true,"e":false}`,
		`{"a":"` + long + `"}`, `{"a":"` + long + `\"` + long + `"}`, `{"a":"` + long + `\u00e9\n` + long + `"}`,
		`{"a":"é ü 中文 😀"}`, `{"a":"\/\b\f\r\t"}`, `{"":""}`, `{"a":[]}`, `{"a":[ ]}`, `{"a":{ }}`,
		// Invalid ones.
		``, `[]`, `"x"`, `{`, `}`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":1 "b":2}`, `{a:1}`, `{"a":01}`,
		`{"a":1.}`, `{"a":.5}`, `{"a":1e}`, `{"a":-}`, `{"a":tru}`, `{"a":nul}`, `{"a":[1,]}`, `{"a":[1 2]}`,
		`{"a":"x` + "\n" + `y"}`, `{"a":"` + long + "\x01" + long + `"}`, `{"a":"\x"}`, `{"a":"\u12g4"}`,
		`{"a":"\u12"}`, `{"a":"` + long, `{"a":"` + long + `\`, `{"a":1}x`, `{"a":1}{}`, `{"a":"x"` + long,
		`{"a":[}`, `{"a":{]}`, `{"a":1}` + "\x00",
	} {
		if got, want := scanValid(doc), jsonObject(doc); got != want {
			t.Errorf("%.60q: scan says %v, encoding/json %v", doc, got, want)
		}
	}
}

func TestScanFindsQuoteAndBackslashAtEveryOffset(t *testing.T) {
	// A special byte at each position of an eight-byte word, after every prefix length.
	for pre := 0; pre < 20; pre++ {
		for _, special := range []string{`\"`, `\\`, `\n`, "\x1f", `"`} {
			doc := `{"a":"` + strings.Repeat("x", pre) + special + strings.Repeat("y", 17) + `"}`
			if got, want := scanValid(doc), jsonObject(doc); got != want {
				t.Errorf("prefix %d, %q: scan says %v, encoding/json %v", pre, special, got, want)
			}
		}
	}
}

func TestScanLimitsDepth(t *testing.T) {
	deep := `{"a":` + strings.Repeat("[", maxScanDepth+5) + strings.Repeat("]", maxScanDepth+5) + `}`
	if scanValid(deep) {
		t.Fatal("a document nested beyond the limit passed")
	}
	ok := `{"a":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`
	if !scanValid(ok) {
		t.Fatal("a document nested 100 deep was refused")
	}
}

// FuzzScan: the one-pass reader accepts exactly the documents encoding/json accepts (with an
// object at the root), whatever their bytes.
func FuzzScan(f *testing.F) {
	f.Add([]byte(`{"a":"x\u00e9\"y","b":[1,-2.5e3,true,null,{}]}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		if got, want := scanValid(string(doc)), jsonObject(string(doc)); got != want {
			t.Fatalf("%q: scan says %v, encoding/json %v", doc, got, want)
		}
	})
}

// walk lists an object's members (and, for each array value, its elements) as the validating
// scanner finds them and as the walkers for validated text do.
func walk(s string) (scanned, walked []string) {
	i := skipSpace(s, 0)
	members(s, i, 1, func(k string, v int) int {
		e := valueEnd(s, v, 2)
		scanned = append(scanned, k+"="+s[v:e])
		if s[v] == '[' {
			elements(s, v, 2, func(v int) int {
				e := valueEnd(s, v, 3)
				scanned = append(scanned, "  "+s[v:e])
				return e
			})
		}
		return e
	})
	FieldsOf(strings.TrimSpace(s), func(k, v string) {
		walked = append(walked, k+"="+v)
		if v[0] == '[' {
			EachElement(v, func(x string) { walked = append(walked, "  "+x) })
		}
	})
	return scanned, walked
}

// FuzzWalkers: on any valid object, the walkers for validated text find the same members and
// elements, with the same extents, as the validating scanner.
func FuzzWalkers(f *testing.F) {
	f.Add([]byte(`{ "a" : [ "x\\\"" , {"b":"\\\\"} , 1e5 , true ] , "c\u0041" : "\"" , "d":null }`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		s := string(doc)
		if !scanValid(s) {
			return
		}
		scanned, walked := walk(s)
		if strings.Join(scanned, "\n") != strings.Join(walked, "\n") {
			t.Fatalf("%q:\nscanner %q\nwalkers %q", s, scanned, walked)
		}
	})
}

// FuzzMembers: Members agrees with Document on validity, and on a valid object hands over the
// members FieldsOf walks, in order.
func FuzzMembers(f *testing.F) {
	f.Add([]byte(`{ "a" : [ "x\\\"" , {"b":"\\\\"} , 1e5 , true ] , "c\u0041" : "\"" , "d":null }`))
	f.Add([]byte(`{"a":1,"b":}`))
	f.Add([]byte(`{"a":{"b":[1,2,{"c":"d"}]},"e":"f"} `))
	f.Fuzz(func(t *testing.T, doc []byte) {
		s := string(doc)
		var got []string
		valid := Members(s, func(k, v string) { got = append(got, k+"="+v) })
		if valid != Document(s, nil) {
			t.Fatalf("%q: Members says valid=%v, Document the opposite", s, valid)
		}
		if !valid {
			return
		}
		var want []string
		FieldsOf(s[skipSpace(s, 0):], func(k, v string) { want = append(want, k+"="+v) })
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("%q:\nMembers  %q\nFieldsOf %q", s, got, want)
		}
	})
}
