package settings

import "fmt"

// StatusMatcher answers "is this status in the list?" with one table lookup, for the hot path.
// The zero value and a nil matcher match nothing.
type StatusMatcher struct {
	table [600]bool
}

// NewStatusMatcher compiles a status list of exact codes ("429") and classes ("5xx").
func NewStatusMatcher(patterns []string) (*StatusMatcher, error) {
	m := &StatusMatcher{}
	for _, p := range patterns {
		lo, hi, ok := parseStatusPattern(p)
		if !ok {
			return nil, fmt.Errorf("status pattern %q: use a code such as \"429\" or a class such as \"5xx\"", p)
		}
		for s := lo; s <= hi; s++ {
			m.table[s] = true
		}
	}
	return m, nil
}

// Match reports whether status is in the list.
func (m *StatusMatcher) Match(status int) bool {
	return m != nil && status >= 0 && status < len(m.table) && m.table[status]
}

// parseStatusPattern accepts three digits 100–599 or a class [1-5]xx and returns the
// inclusive range it covers.
func parseStatusPattern(p string) (lo, hi int, ok bool) {
	if len(p) != 3 || p[0] < '1' || p[0] > '5' {
		return 0, 0, false
	}
	class := int(p[0]-'0') * 100
	if p[1:] == "xx" {
		return class, class + 99, true
	}
	if p[1] < '0' || p[1] > '9' || p[2] < '0' || p[2] > '9' {
		return 0, 0, false
	}
	n := class + int(p[1]-'0')*10 + int(p[2]-'0')
	return n, n, true
}
