package httpapi

import (
	"encoding/base64"
	"net/http"
	"strings"
)

// TokenBytes is the number of random bytes in a token both sockets accept:
// its text is their unpadded base64url.
const TokenBytes = 32

// tokenLen is the length of a token's text.
var tokenLen = base64.RawURLEncoding.EncodedLen(TokenBytes)

// BearerToken extracts the token from the Authorization header; present
// is false when there is no single Bearer credential.
func BearerToken(r *http.Request) (token string, present bool) {
	vals := r.Header.Values("Authorization")
	if len(vals) != 1 {
		return "", false
	}
	scheme, token, ok := strings.Cut(vals[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(token), true
}

// WellFormedToken reports whether s has a token's shape.
func WellFormedToken(s string) bool {
	if len(s) != tokenLen {
		return false
	}
	_, err := base64.RawURLEncoding.Strict().DecodeString(s)
	return err == nil
}
