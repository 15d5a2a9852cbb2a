package webhooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Errors Verify returns.
var (
	// ErrNoSignature: the header is missing, malformed, or has no v1 signature.
	ErrNoSignature = errors.New("webhooks: no usable signature header")
	// ErrBadSignature: no v1 signature matches the body and timestamp under the secret.
	ErrBadSignature = errors.New("webhooks: signature does not match")
	// ErrTimestamp: the signed timestamp is further from now than the tolerance (a replay, or a
	// clock far off).
	ErrTimestamp = errors.New("webhooks: signature timestamp outside the tolerance")
)

// SignatureHeader, EventHeader and DeliveryHeader are the headers every POST carries.
const (
	SignatureHeader = "X-Switchyard-Signature"
	EventHeader     = "X-Switchyard-Event"
	DeliveryHeader  = "X-Switchyard-Delivery"
)

// Sign is the X-Switchyard-Signature value for body sent at t under secret:
// "t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>".
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Verify checks an X-Switchyard-Signature header against the raw body as received: one of its
// v1 signatures must be the HMAC of "<t>.<body>" under secret (compared in constant time), and t
// must lie within tolerance of now, either way, so a captured request cannot be replayed later.
// A tolerance of 0 or less skips the time check (not advised). Unknown fields are ignored.
func Verify(secret string, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var ts string
	var sigs [][]byte
	for part := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			if ts != "" {
				return ErrNoSignature // two timestamps: which one was signed is anyone's guess
			}
			ts = v
		case "v1":
			if b, err := hex.DecodeString(v); err == nil && len(b) == sha256.Size {
				sigs = append(sigs, b)
			}
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return ErrNoSignature
	}
	want := mac(secret, ts, body)
	match := false
	for _, s := range sigs {
		match = hmac.Equal(s, want) || match
	}
	if !match {
		return ErrBadSignature
	}
	if tolerance > 0 {
		if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
			return ErrTimestamp
		}
	}
	return nil
}
