package management

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/httpapi"
)

// CursorLifetime is how long a list cursor stays valid after it was issued.
const CursorLifetime = 15 * time.Minute

// Page sizes of list routes.
const (
	DefaultPageSize = 50
	MaxPageSize     = 500
)

// Keyset is the position a cursor carries: the upper bound captured when
// the first page was read (so rows added later never shift the listing)
// and the key of the last row returned. Events use their acceptance
// sequence; other records use (created_at, id).
type Keyset[K any] struct {
	Bound K `json:"b"`
	After K `json:"a"`
}

// Cursors makes and checks list cursors: HMAC-SHA256 authenticated, bound
// to the endpoint (method and path) and the filters, carrying a Keyset,
// and expiring CursorLifetime after they were issued.
type Cursors struct {
	key   []byte
	clock clock.Clock
}

// NewCursors returns a codec keyed by key (at least 32 bytes), or by 32
// fresh bytes from entropy when key is empty.
func NewCursors(key []byte, entropy io.Reader, c clock.Clock) (*Cursors, error) {
	if len(key) == 0 {
		key = make([]byte, 32)
		if _, err := io.ReadFull(entropy, key); err != nil {
			return nil, fmt.Errorf("management: cannot draw a cursor key: %w", err)
		}
	}
	if len(key) < 32 {
		return nil, errors.New("management: a cursor key needs at least 32 bytes")
	}
	return &Cursors{key: append([]byte(nil), key...), clock: c}, nil
}

type cursorPayload struct {
	Version  int            `json:"v"`
	Endpoint string         `json:"e"`
	Filters  string         `json:"f"`
	Expires  int64          `json:"x"`
	Keyset   jsontext.Value `json:"k"`
}

// EncodeCursor returns the cursor for the next page of the listing r
// asked for, under its filters.
func EncodeCursor[K any](c *Cursors, r *http.Request, filters any, ks Keyset[K]) (string, error) {
	fd, err := filterDigest(filters)
	if err != nil {
		return "", err
	}
	kv, err := json.Marshal(ks, json.Deterministic(true))
	if err != nil {
		return "", fmt.Errorf("management: encode cursor position: %w", err)
	}
	p := cursorPayload{
		Version:  1,
		Endpoint: endpointDigest(r),
		Filters:  fd,
		Expires:  c.clock.Now().Add(CursorLifetime).UnixMilli(),
		Keyset:   kv,
	}
	body, err := json.Marshal(p, json.Deterministic(true))
	if err != nil {
		return "", fmt.Errorf("management: encode cursor: %w", err)
	}
	enc := base64.RawURLEncoding
	return enc.EncodeToString(body) + "." + enc.EncodeToString(c.mac(body)), nil
}

// DecodeCursor checks cursor against the listing r asks for under its
// filters and returns its position. A cursor that was altered or is not
// one is invalid_cursor; one from another endpoint or other filters is
// cursor_mismatch; an old one is cursor_expired.
func DecodeCursor[K any](c *Cursors, r *http.Request, filters any, cursor string) (Keyset[K], error) {
	var ks Keyset[K]
	invalid := httpapi.Wrap(httpapi.CodeInvalidCursor, httpapi.ErrInvalidCursor, "the cursor is not valid (altered or truncated); start the listing again without a cursor")
	b64, m64, ok := strings.Cut(cursor, ".")
	if !ok {
		return ks, invalid
	}
	enc := base64.RawURLEncoding
	body, err1 := enc.DecodeString(b64)
	mac, err2 := enc.DecodeString(m64)
	if err1 != nil || err2 != nil || !hmac.Equal(mac, c.mac(body)) {
		return ks, invalid
	}
	var p cursorPayload
	if err := json.Unmarshal(body, &p, json.RejectUnknownMembers(true)); err != nil || p.Version != 1 {
		return ks, invalid
	}
	fd, err := filterDigest(filters)
	if err != nil {
		return ks, err
	}
	if p.Endpoint != endpointDigest(r) || p.Filters != fd {
		return ks, httpapi.Wrap(httpapi.CodeCursorMismatch, httpapi.ErrCursorMismatch,
			"the cursor belongs to another listing or to other filters; pass the same filters as the first page, or start again without a cursor")
	}
	if !c.clock.Now().Before(time.UnixMilli(p.Expires)) {
		return ks, httpapi.Wrap(httpapi.CodeCursorExpired, httpapi.ErrCursorExpired,
			"the cursor has expired (cursors last 15 minutes); start the listing again without a cursor")
	}
	if err := json.Unmarshal(p.Keyset, &ks, json.RejectUnknownMembers(true)); err != nil {
		return ks, invalid
	}
	return ks, nil
}

func (c *Cursors) mac(body []byte) []byte {
	h := hmac.New(sha256.New, c.key)
	h.Write([]byte("open-conduit cursor v1\x00"))
	h.Write(body)
	return h.Sum(nil)
}

func endpointDigest(r *http.Request) string {
	sum := sha256.Sum256([]byte(r.Method + " " + r.URL.EscapedPath()))
	return hex.EncodeToString(sum[:12])
}

func filterDigest(filters any) (string, error) {
	b, err := json.Marshal(filters, json.Deterministic(true))
	if err != nil {
		// Filters are the caller's query values: the only way they fail
		// to encode is text that is not UTF-8.
		return "", httpapi.Wrap(httpapi.CodeInvalidRequest, err, "a filter value is not valid UTF-8; send query values as UTF-8, percent-encoded")
	}
	v := jsontext.Value(b)
	if err := v.Canonicalize(); err != nil {
		return "", fmt.Errorf("management: canonicalize cursor filters: %w", err)
	}
	sum := sha256.Sum256(v)
	return hex.EncodeToString(sum[:12]), nil
}

// PageParams reads the limit and cursor query parameters from q: limit
// defaults to DefaultPageSize and may not exceed MaxPageSize.
func PageParams(q url.Values) (limit int, cursor string, err error) {
	limit = DefaultPageSize
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxPageSize {
			return 0, "", httpapi.Errorf(httpapi.CodeInvalidRequest, "limit must be a whole number from 1 to %d", MaxPageSize)
		}
		limit = n
	}
	return limit, q.Get("cursor"), nil
}
