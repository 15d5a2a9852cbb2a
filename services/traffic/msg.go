package traffic

import (
	"encoding/json"
	"fmt"

	"switchyard/services/errs"
)

// storedMsg is an errs.Msg as JSON, keeping each argument's type so the catalog's verbs (%d,
// %s) still fit when the message is rendered again in another language.
type storedMsg struct {
	Key  string      `json:"key"`
	Args []storedArg `json:"args,omitempty"`
}

type storedArg struct {
	I *int64     `json:"i,omitempty"`
	F *float64   `json:"f,omitempty"`
	S *string    `json:"s,omitempty"`
	M *storedMsg `json:"m,omitempty"`
}

func toStored(m errs.Msg, redact func(string) string) storedMsg {
	out := storedMsg{Key: m.Key}
	for _, a := range m.Args {
		var sa storedArg
		switch v := a.(type) {
		case int:
			n := int64(v)
			sa.I = &n
		case int64:
			sa.I = &v
		case float64:
			sa.F = &v
		case string:
			s := redact(v)
			sa.S = &s
		case errs.Msg:
			sm := toStored(v, redact)
			sa.M = &sm
		default:
			s := redact(fmt.Sprint(v))
			sa.S = &s
		}
		out.Args = append(out.Args, sa)
	}
	return out
}

func (s storedMsg) msg() errs.Msg {
	m := errs.Msg{Key: s.Key}
	for _, a := range s.Args {
		switch {
		case a.I != nil:
			m.Args = append(m.Args, *a.I)
		case a.F != nil:
			m.Args = append(m.Args, *a.F)
		case a.M != nil:
			m.Args = append(m.Args, a.M.msg())
		case a.S != nil:
			m.Args = append(m.Args, *a.S)
		default:
			m.Args = append(m.Args, "")
		}
	}
	return m
}

// encodeMsg stores a message with its string arguments redacted; "" for no message.
func encodeMsg(m errs.Msg, redact func(string) string) string {
	if m.Key == "" {
		return ""
	}
	b, err := json.Marshal(toStored(m, redact))
	if err != nil {
		return ""
	}
	return string(b)
}

func decodeMsg(s string) errs.Msg {
	if s == "" {
		return errs.Msg{}
	}
	var sm storedMsg
	if json.Unmarshal([]byte(s), &sm) != nil {
		return errs.Msg{}
	}
	return sm.msg()
}
