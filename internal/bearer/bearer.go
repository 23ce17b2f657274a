// Package bearer is the one credential format of Open Conduit: operator
// tokens (management socket) and execution tokens (toolbelt socket) alike
// are the unpadded base64url text of Bytes random bytes drawn from an
// injected entropy source, stored only as the SHA-256 digest of that text,
// and recognised by their exact shape before any lookup.
//
// It must never keep, log or return a token in an error, never draw
// randomness from anywhere but the reader it is given, and never accept a
// text of any other length or alphabet as well formed.
package bearer

import (
	"crypto/sha256"
	"encoding/base64"
	"io"
)

// Bytes is the number of random bytes in a token.
const Bytes = 32

// Len is the length of a token's text: the unpadded base64url encoding of
// Bytes bytes.
const Len = (Bytes*8 + 5) / 6

// encoding is the alphabet of a token's text: base64url without padding,
// strict about the unused low bits of the last character, so that each
// token has exactly one text.
var encoding = base64.RawURLEncoding.Strict()

// Digest is the SHA-256 of a token's text. Only digests are stored.
type Digest [sha256.Size]byte

// New draws Bytes bytes from entropy and returns their text. A failed
// read is returned as the reader reported it, for the caller to wrap. The
// reader need not be safe for concurrent use: a caller sharing one
// serialises its calls.
func New(entropy io.Reader) (string, error) {
	var raw [Bytes]byte
	if _, err := io.ReadFull(entropy, raw[:]); err != nil {
		return "", err
	}
	return encoding.EncodeToString(raw[:]), nil
}

// DigestOf returns the digest under which the token with text tok is
// stored.
func DigestOf(tok string) Digest { return sha256.Sum256([]byte(tok)) }

// WellFormed reports whether s has a token's shape: exactly Len
// characters of the unpadded base64url alphabet that decode to Bytes
// bytes.
func WellFormed(s string) bool {
	if len(s) != Len {
		return false
	}
	_, err := encoding.DecodeString(s)
	return err == nil
}
