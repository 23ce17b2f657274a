package github

import (
	"strings"
	"testing"
)

func TestVerifySignature(t *testing.T) {
	secret := []byte("It's a Secret to Everybody")
	body := []byte("Hello, World!")
	// GitHub's documented example of this secret and body.
	const documented = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	if got := Sign(secret, body); got != documented {
		t.Fatalf("Sign = %s, want GitHub's example %s", got, documented)
	}
	good := Sign(secret, body)
	for _, c := range []struct {
		name, header string
		body         []byte
		secret       []byte
		want         string
	}{
		{"right", good, body, secret, ""},
		{"missing", "", body, secret, reasonSignatureMissing},
		{"wrong secret", Sign([]byte("another"), body), body, secret, reasonSignatureMismatch},
		{"tampered body", good, []byte("Hello, World?"), secret, reasonSignatureMismatch},
		{"one more byte", good, append([]byte("Hello, World!"), ' '), secret, reasonSignatureMismatch},
		{"sha1 prefix", "sha1=" + strings.TrimPrefix(good, "sha256="), body, secret, reasonSignatureMalformed},
		{"no prefix", strings.TrimPrefix(good, "sha256="), body, secret, reasonSignatureMalformed},
		{"upper-case prefix", "SHA256=" + strings.TrimPrefix(good, "sha256="), body, secret, reasonSignatureMalformed},
		{"short", good[:len(good)-2], body, secret, reasonSignatureMalformed},
		{"not hex", good[:len(good)-2] + "zz", body, secret, reasonSignatureMalformed},
		{"last digit changed", good[:len(good)-1] + "8", body, secret, reasonSignatureMismatch},
	} {
		if got := verify(c.secret, c.body, c.header); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
