package slack

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
)

// The headers Slack signs a request with.
const (
	SignatureHeader = "X-Slack-Signature"
	TimestampHeader = "X-Slack-Request-Timestamp"
)

// MaxSkew is how far a request's timestamp may be from the clock, either
// way: Slack's own advice against replays.
const MaxSkew = 5 * time.Minute

// signatureVersion is the only version of Slack's signature accepted.
const signatureVersion = "v0"

// Why a request's signature is refused (the reason logged and counted,
// never a header's value).
const (
	reasonSignatureMissing   = "signature_missing"
	reasonSignatureMalformed = "signature_malformed"
	reasonSignatureMismatch  = "signature_mismatch"
	reasonTimestampMissing   = "timestamp_missing"
	reasonTimestampStale     = "timestamp_stale"
)

// verify checks a request's X-Slack-Signature (sig) and
// X-Slack-Request-Timestamp (ts) against body under secret at now: the
// timestamp within MaxSkew of now, and the signature the HMAC-SHA256 of
// v0:ts:body, compared in constant time. It returns "" when both hold,
// else the reason.
func verify(secret, body []byte, ts, sig string, now time.Time) string {
	if ts == "" {
		return reasonTimestampMissing
	}
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || secs <= 0 || strconv.FormatInt(secs, 10) != ts {
		return reasonTimestampMissing
	}
	if d := now.Sub(time.Unix(secs, 0)); d > MaxSkew || d < -MaxSkew {
		return reasonTimestampStale
	}
	if sig == "" {
		return reasonSignatureMissing
	}
	hexSig, ok := strings.CutPrefix(sig, signatureVersion+"=")
	if !ok || len(hexSig) != 2*sha256.Size {
		return reasonSignatureMalformed
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return reasonSignatureMalformed
	}
	if !hmac.Equal(got, mac(secret, ts, body)) {
		return reasonSignatureMismatch
	}
	return ""
}

func mac(secret []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(signatureVersion + ":" + ts + ":"))
	m.Write(body)
	return m.Sum(nil)
}

// Sign returns the X-Slack-Signature Slack would send for body at
// timestamp ts (Unix seconds) under secret, for tests and tools that send
// requests.
func Sign(secret []byte, ts string, body []byte) string {
	return signatureVersion + "=" + hex.EncodeToString(mac(secret, ts, body))
}
