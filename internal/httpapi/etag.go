package httpapi

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strings"
)

// ETag returns the entity tag of a record at a revision: a strong tag
// derived from the revision, so that it changes whenever the record does
// and says nothing about what the revision is.
func ETag(revision string) string {
	sum := sha256.Sum256([]byte("open-conduit revision\x00" + revision))
	return `"` + base64.RawURLEncoding.EncodeToString(sum[:16]) + `"`
}

// Tagged returns a single read's response carrying the ETag of revision.
// A GET whose If-None-Match names that tag is answered 304 Not Modified.
func Tagged(revision string, body any) *Response {
	return &Response{ETag: ETag(revision), Body: body}
}

// IfNoneMatch reports whether the request's If-None-Match header matches
// etag, by the weak comparison RFC 9110 prescribes for it.
func IfNoneMatch(r *http.Request, etag string) bool {
	want := strings.TrimPrefix(etag, "W/")
	for _, line := range r.Header.Values("If-None-Match") {
		for tag := range strings.SplitSeq(line, ",") {
			tag = strings.TrimSpace(tag)
			if tag == "*" || strings.TrimPrefix(tag, "W/") == want {
				return true
			}
		}
	}
	return false
}
