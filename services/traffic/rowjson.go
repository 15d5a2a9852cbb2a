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
	return listJSON(chain, func(b []byte, a *Attempt) []byte {
		b = append(b, `{"connection_id":`...)
		b = strconv.AppendInt(b, a.ConnectionID, 10)
		b = append(b, `,"connection":`...)
		b = appendJSONString(b, a.Connection)
		b = append(b, `,"kind":`...)
		b = appendJSONString(b, a.Kind)
		b = append(b, `,"status":`...)
		b = strconv.AppendInt(b, int64(a.Status), 10)
		b = appendOmitEmpty(b, `,"reason":`, a.Reason)
		b = append(b, `,"duration":`...)
		b = strconv.AppendInt(b, int64(a.Duration), 10)
		b = appendOmitEmpty(b, `,"detail":`, a.Detail)
		b = appendOmitEmpty(b, `,"target":`, a.Target)
		return append(b, '}')
	})
}

// skippedJSON is json.Marshal of the skipped connections, "[]" for none.
func skippedJSON(skipped []Skip) string {
	return listJSON(skipped, func(b []byte, x *Skip) []byte {
		b = append(b, `{"connection":`...)
		b = appendJSONString(b, x.Connection)
		b = append(b, `,"reason":`...)
		b = appendJSONString(b, x.Reason)
		b = appendOmitEmpty(b, `,"detail":`, x.Detail)
		b = appendOmitEmpty(b, `,"target":`, x.Target)
		b = append(b, `,"seconds_left":`...)
		b = strconv.AppendInt(b, x.SecondsLeft, 10)
		return append(b, '}')
	})
}

// listJSON is the JSON array of list, each element written by appendOne; "[]" for none.
func listJSON[T any](list []T, appendOne func(b []byte, x *T) []byte) string {
	if len(list) == 0 {
		return "[]"
	}
	b := make([]byte, 0, 96*len(list))
	b = append(b, '[')
	for i := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendOne(b, &list[i])
	}
	return string(append(b, ']'))
}

// appendOmitEmpty appends the member key (with its leading comma) and s, unless s is empty:
// a string field tagged omitempty.
func appendOmitEmpty(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return appendJSONString(append(b, key...), s)
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
