package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// MaxBody is the largest request body the API accepts: 1 MiB.
const MaxBody = 1 << 20

// ReadBody applies the request discipline of a mutation: no query
// string, Content-Type application/json, at most MaxBody bytes, and one
// strict JSON object (no duplicate names, no nulls, valid UTF-8). Unknown
// fields are refused when the handler decodes the body (DecodeBody),
// since only the handler knows its fields.
// It returns the body and the hash of its canonical form.
func ReadBody(w http.ResponseWriter, r *http.Request) (body []byte, hash string, err error) {
	return readBody(w, r, strictJSON)
}

// ReadJSON is ReadBody for a route that never compares one body with
// another (the toolbelt socket's call, whose idempotency the toolbelt
// keys on the input alone): the same discipline and refusals, without
// hashing the canonical form.
func ReadJSON(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, _, err := readBody(w, r, func(b []byte) (string, error) { return "", checkJSON(b) })
	return body, err
}

func readBody(w http.ResponseWriter, r *http.Request, check func([]byte) (string, error)) (body []byte, hash string, err error) {
	if r.URL.RawQuery != "" || r.URL.ForceQuery {
		return nil, "", Errorf(CodeInvalidRequest, "a %s request takes no query string; put its parameters in the JSON body", r.Method)
	}
	if err := checkContentType(r.Header.Values("Content-Type")); err != nil {
		return nil, "", err
	}
	if r.ContentLength > MaxBody {
		return nil, "", tooLarge()
	}
	body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, "", tooLarge()
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, "", Wrap(CodeInvalidRequest, err, "the request body did not arrive in time; send it whole, at once")
		}
		return nil, "", Wrap(CodeInvalidRequest, err, "the request body could not be read; send it again")
	}
	hash, err = check(body)
	if err != nil {
		return nil, "", err
	}
	return body, hash, nil
}

func tooLarge() error {
	return Wrap(CodePayloadTooLarge, ErrPayloadTooLarge, fmt.Sprintf("the request body is larger than %d bytes (1 MiB); send less", MaxBody))
}

func checkContentType(vals []string) error {
	refuse := func() error {
		return Wrap(CodeUnsupportedMediaType, ErrUnsupportedMediaType, "send the body as JSON with the header Content-Type: application/json")
	}
	if len(vals) != 1 {
		return refuse()
	}
	mt, params, err := mime.ParseMediaType(vals[0])
	if err != nil || mt != "application/json" {
		return refuse()
	}
	for k, v := range params {
		if k != "charset" || !strings.EqualFold(v, "utf-8") {
			return refuse()
		}
	}
	return nil
}

// strictJSON checks that b is exactly one JSON object with no duplicate
// member names, no null anywhere, valid UTF-8 and numbers a float64 can
// hold, and returns the hex SHA-256 of its canonical form (RFC 8785), so
// that whitespace and member order never make two bodies differ. Its
// errors are invalid_request with a message naming the place (a JSON
// pointer into the caller's own body) but never a value.
func strictJSON(b []byte) (string, error) {
	if err := checkJSON(b); err != nil {
		return "", err
	}
	v := jsontext.Value(bytes.Clone(b))
	if err := v.Canonicalize(); err != nil {
		return "", Wrap(CodeInvalidRequest, err, "the request body holds a number out of range")
	}
	sum := sha256.Sum256(v)
	return hex.EncodeToString(sum[:]), nil
}

// checkJSON is strictJSON's check without the hash.
func checkJSON(b []byte) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return Errorf(CodeInvalidRequest, "the request body is empty; send a JSON object ({} when the request has no fields)")
	}
	dec := jsontext.NewDecoder(bytes.NewReader(b))
	for first := true; ; first = false {
		tok, err := dec.ReadToken()
		if err != nil {
			return syntaxError(err)
		}
		if first && tok.Kind() != '{' {
			return Errorf(CodeInvalidRequest, "the request body must be a JSON object")
		}
		if tok.Kind() == 'n' {
			return Errorf(CodeInvalidRequest, "null is not allowed (at %s); leave the field out instead", pointer(dec.StackPointer()))
		}
		if tok.Kind() == '0' && !NumberInRange(tok.String()) {
			return Errorf(CodeInvalidRequest, "a number out of range (at %s): a number must be one a 64-bit float holds, neither beyond ±1.8e308 nor a nonzero one below 4.9e-324", pointer(dec.StackPointer()))
		}
		if dec.StackDepth() == 0 {
			break
		}
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return Errorf(CodeInvalidRequest, "the request body must hold exactly one JSON value")
	}
	return nil
}

// NumberInRange reports whether raw, a JSON number, is one a float64
// holds: it neither overflows to an infinity nor, being nonzero,
// underflows to zero. Such a number would be stored as sent and hashed as
// the float it rounds to, so two different ones would be the same request.
func NumberInRange(raw string) bool {
	f, err := strconv.ParseFloat(raw, 64)
	if err != nil {
		return false
	}
	if f != 0 {
		return true
	}
	mant, _, _ := strings.Cut(strings.ToLower(raw), "e")
	return strings.Trim(mant, "-+0.") == ""
}

func syntaxError(err error) error {
	var se *jsontext.SyntacticError
	if errors.As(err, &se) {
		if errors.Is(se.Err, jsontext.ErrDuplicateName) {
			return Wrap(CodeInvalidRequest, err, fmt.Sprintf("duplicate field (at %s); send each field once", pointer(se.JSONPointer)))
		}
		return Wrap(CodeInvalidRequest, err, fmt.Sprintf("the request body is not valid JSON (near byte %d)", se.ByteOffset))
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return Wrap(CodeInvalidRequest, err, "the request body is not valid JSON (it ends early)")
	}
	return Wrap(CodeInvalidRequest, err, "the request body is not valid JSON")
}

// pointer renders a JSON pointer into the caller's body for a message,
// shortened so that a message stays short.
func pointer(p jsontext.Pointer) string {
	s := string(p)
	if s == "" {
		return "the top level"
	}
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// bodyKey carries a mutation's validated body on the context.
type bodyKey struct{}

// WithBody returns r carrying body, as ReadBody validated it, for
// DecodeBody.
func WithBody(r *http.Request, body []byte) *http.Request {
	r = r.WithContext(context.WithValue(r.Context(), bodyKey{}, body))
	r.Body = io.NopCloser(bytes.NewReader(body))
	return r
}

// DecodeBody decodes the validated body of a mutation into v, refusing
// fields v does not have. Its errors are invalid_request with a safe
// message.
func DecodeBody(r *http.Request, v any) error {
	body, ok := r.Context().Value(bodyKey{}).([]byte)
	if !ok {
		return errors.New("httpapi: DecodeBody called outside a mutation route")
	}
	err := json.Unmarshal(body, v, json.RejectUnknownMembers(true))
	if err == nil {
		return nil
	}
	var pe *Error
	if errors.As(err, &pe) {
		return pe
	}
	var se *json.SemanticError
	if errors.As(err, &se) {
		if errors.Is(se.Err, json.ErrUnknownName) {
			return Wrap(CodeInvalidRequest, err, fmt.Sprintf("unknown field (at %s); see docs/api.md for this request's fields", pointer(se.JSONPointer)))
		}
		return Wrap(CodeInvalidRequest, err, fmt.Sprintf("the value at %s has the wrong type or form", pointer(se.JSONPointer)))
	}
	return Wrap(CodeInvalidRequest, err, "the request body does not match this request's fields")
}

// NoQuery refuses a request that carries a query string.
func NoQuery(r *http.Request) error {
	if r.URL.RawQuery != "" || r.URL.ForceQuery {
		return Errorf(CodeInvalidRequest, "this request takes no query parameters")
	}
	return nil
}

// Query parses the query string, refusing malformed queries, parameters
// not in allowed and parameters given more than once.
func Query(r *http.Request, allowed ...string) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, Wrap(CodeInvalidRequest, err, "the query string is malformed")
	}
	for name, vals := range q {
		if !utf8.ValidString(name) || slices.ContainsFunc(vals, invalidUTF8) {
			return nil, Errorf(CodeInvalidRequest, "the query string holds text that is not valid UTF-8; send names and values as UTF-8, percent-encoded")
		}
		known := false
		for _, a := range allowed {
			known = known || a == name
		}
		if !known {
			return nil, Errorf(CodeInvalidRequest, "unknown query parameter %q; this request takes %s", Clip(name), strings.Join(quoteAll(allowed), ", "))
		}
		if len(vals) != 1 {
			return nil, Errorf(CodeInvalidRequest, "query parameter %q is given more than once", name)
		}
	}
	return q, nil
}

// Clip shortens a caller's string (an id, a name) for a message.
func Clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

func invalidUTF8(s string) bool { return !utf8.ValidString(s) }

func quoteAll(ss []string) []string {
	if len(ss) == 0 {
		return []string{"none"}
	}
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}
