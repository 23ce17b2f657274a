package bearer

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestLenIsTheEncodedLength(t *testing.T) {
	if want := base64.RawURLEncoding.EncodedLen(Bytes); Len != want || Len != 43 {
		t.Fatalf("Len = %d, want %d (43)", Len, want)
	}
}

func TestNewEncodesTheDrawnBytes(t *testing.T) {
	raw := bytes.Repeat([]byte{0xfb, 0xff, 0x01}, 11)[:Bytes]
	src := bytes.NewReader(append(bytes.Clone(raw), 0x42))
	tok, err := New(src)
	if err != nil {
		t.Fatal(err)
	}
	if len(tok) != Len {
		t.Fatalf("len(%q) = %d, want %d", tok, len(tok), Len)
	}
	if strings.ContainsAny(tok, "+/=") {
		t.Errorf("%q is not unpadded base64url", tok)
	}
	got, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || !bytes.Equal(got, raw) {
		t.Errorf("%q decodes to %x, %v; want the %d bytes drawn, %x", tok, got, err, Bytes, raw)
	}
	if src.Len() != 1 {
		t.Errorf("New drew %d bytes, want exactly %d", len(raw)+1-src.Len(), Bytes)
	}
	if !WellFormed(tok) {
		t.Errorf("a fresh token %q is not well formed", tok)
	}
}

func TestNewRefusesShortEntropy(t *testing.T) {
	if tok, err := New(bytes.NewReader(make([]byte, Bytes-1))); !errors.Is(err, io.ErrUnexpectedEOF) || tok != "" {
		t.Errorf("New over %d bytes = %q, %v; want no token and io.ErrUnexpectedEOF", Bytes-1, tok, err)
	}
	boom := errors.New("no entropy")
	if tok, err := New(failing{boom}); !errors.Is(err, boom) || tok != "" {
		t.Errorf("New over a failing reader = %q, %v", tok, err)
	}
}

type failing struct{ err error }

func (f failing) Read([]byte) (int, error) { return 0, f.err }

func TestDigestOfIsSHA256OfTheText(t *testing.T) {
	tok := strings.Repeat("A", Len)
	d := DigestOf(tok)
	// SHA-256 of 43 'A's, computed independently.
	want := sha256.Sum256([]byte(tok))
	if d != Digest(want) {
		t.Fatalf("DigestOf = %x, want %x", d, want)
	}
	const emptySHA = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	if e := DigestOf(""); hex.EncodeToString(e[:]) != emptySHA {
		t.Errorf("DigestOf(\"\") = %x", e)
	}
	if DigestOf(tok) == DigestOf(tok[:Len-1]+"B") {
		t.Error("two texts share a digest")
	}
}

func TestWellFormedRefusesNearMisses(t *testing.T) {
	good := strings.Repeat("Ab-_", 10) + "xyA"
	if len(good) != Len || !WellFormed(good) {
		t.Fatalf("control: %q (%d) is not well formed", good, len(good))
	}
	for name, s := range map[string]string{
		"empty":                   "",
		"one short":               good[:Len-1],
		"one long":                good + "A",
		"padded":                  good + "=",
		"padded in place":         good[:Len-1] + "=",
		"standard alphabet plus":  "+" + good[1:],
		"standard alphabet slash": good[:5] + "/" + good[6:],
		"space":                   good[:10] + " " + good[11:],
		"newline at the end":      good[:Len-1] + "\n",
		"dot":                     good[:20] + "." + good[21:],
		"non-ASCII":               good[:Len-2] + "é",
		"unused bits set (B)":     good[:Len-1] + "B",
		"unused bits set (D)":     good[:Len-1] + "D",
		"unused bits set (_)":     good[:Len-1] + "_",
		"std base64 of 32 bytes":  base64.StdEncoding.EncodeToString(make([]byte, Bytes)),
		"hex of 32 bytes":         hex.EncodeToString(make([]byte, Bytes)),
		"url base64 of 31 bytes":  base64.RawURLEncoding.EncodeToString(make([]byte, Bytes-1)),
		"url base64 of 33 bytes":  base64.RawURLEncoding.EncodeToString(make([]byte, Bytes+1)),
	} {
		if WellFormed(s) {
			t.Errorf("%s: %q is well formed", name, s)
		}
	}
	// Every character of the alphabet is accepted where all six bits count.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	for _, c := range alphabet {
		s := string(c) + good[1:]
		if !WellFormed(s) {
			t.Errorf("%q (first character %q) is refused", s, c)
		}
	}
}
