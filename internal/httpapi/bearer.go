package httpapi

import (
	"net/http"
	"strings"
)

// BearerToken extracts the token from the Authorization header; present
// is false when there is no single Bearer credential. Its shape is
// bearer.WellFormed's to check.
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
