package traffic

import (
	"encoding/json"
	"strconv"
	"switchyard/services/jsonstr"
)

// The request log's JSON columns are written by hand for the shapes every request has (no
// attempts or skips at all, or a few attempts): encoding/json's reflection cost more than the
// rest of a row. The bytes are exactly json.Marshal's (rowjson_test.go compares them); the
// combo route, rare and with a time in it, still goes through json.Marshal.

// chainJSON is json.Marshal of the attempts, "[]" for none.
func chainJSON(chain []Attempt) string {
	if len(chain) == 0 {
		return "[]"
	}
	b := make([]byte, 0, 96*len(chain))
	b = append(b, '[')
	for i := range chain {
		a := &chain[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"connection_id":`...)
		b = strconv.AppendInt(b, a.ConnectionID, 10)
		b = append(b, `,"connection":`...)
		b = appendJSONString(b, a.Connection)
		b = append(b, `,"kind":`...)
		b = appendJSONString(b, a.Kind)
		b = append(b, `,"status":`...)
		b = strconv.AppendInt(b, int64(a.Status), 10)
		if a.Reason != "" {
			b = append(b, `,"reason":`...)
			b = appendJSONString(b, a.Reason)
		}
		b = append(b, `,"duration":`...)
		b = strconv.AppendInt(b, int64(a.Duration), 10)
		if a.Detail != "" {
			b = append(b, `,"detail":`...)
			b = appendJSONString(b, a.Detail)
		}
		if a.Target != "" {
			b = append(b, `,"target":`...)
			b = appendJSONString(b, a.Target)
		}
		b = append(b, '}')
	}
	return string(append(b, ']'))
}

// skippedJSON is json.Marshal of the skipped connections, "[]" for none.
func skippedJSON(skipped []Skip) string {
	if len(skipped) == 0 {
		return "[]"
	}
	b := make([]byte, 0, 96*len(skipped))
	b = append(b, '[')
	for i := range skipped {
		x := &skipped[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"connection":`...)
		b = appendJSONString(b, x.Connection)
		b = append(b, `,"reason":`...)
		b = appendJSONString(b, x.Reason)
		if x.Detail != "" {
			b = append(b, `,"detail":`...)
			b = appendJSONString(b, x.Detail)
		}
		if x.Target != "" {
			b = append(b, `,"target":`...)
			b = appendJSONString(b, x.Target)
		}
		b = append(b, `,"seconds_left":`...)
		b = strconv.AppendInt(b, x.SecondsLeft, 10)
		b = append(b, '}')
	}
	return string(append(b, ']'))
}

// routeJSON is json.Marshal of the combo route, "[]" for none.
func routeJSON(route []RouteStep) string {
	if len(route) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(route)
	return string(b)
}

// appendJSONString is json.Marshal of a string.
func appendJSONString(b []byte, s string) []byte { return jsonstr.AppendMarshal(b, s) }
