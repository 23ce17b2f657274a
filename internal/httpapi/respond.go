package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"

	"github.com/go-json-experiment/json"

	"github.com/open-conduit/open-conduit/api"
)

// HandlerFunc is the one signature of every handler of both sockets. It
// returns the response body (any JSON-encodable value, a *Response for
// another status, headers or an ETag, or an http.Handler for streaming
// reads), or an error that the socket's Writer maps to the envelope.
type HandlerFunc func(r *http.Request) (any, error)

// Response lets a handler choose the status and headers, or attach an
// ETag to a single read.
type Response struct {
	// Status defaults to 200.
	Status int
	Header http.Header
	// ETag, on a GET, is the response's entity tag (see Tagged); a request
	// whose If-None-Match matches it is answered 304 without a body.
	ETag string
	// Body is encoded as JSON; nil sends no body.
	Body any
}

// Rendered is a response ready to be written (and, for an idempotent
// route, recorded).
type Rendered struct {
	Status int
	Header http.Header
	Body   []byte
	// Stream, when set, writes the whole response itself.
	Stream http.Handler
}

// Render turns a handler's result into status, headers and body bytes.
func Render(r *http.Request, out any) (Rendered, error) {
	res := Rendered{Status: http.StatusOK, Header: http.Header{}}
	switch v := out.(type) {
	case http.Handler:
		res.Stream = v
		return res, nil
	case *Response:
		if v.Status != 0 {
			res.Status = v.Status
		}
		for k, vals := range v.Header {
			res.Header[k] = slices.Clone(vals)
		}
		if v.ETag != "" {
			res.Header.Set("ETag", v.ETag)
			if (r.Method == http.MethodGet || r.Method == http.MethodHead) && IfNoneMatch(r, v.ETag) {
				res.Status = http.StatusNotModified
				return res, nil
			}
		}
		if v.Body == nil {
			return res, nil
		}
		out = v.Body
	case nil:
		res.Status = http.StatusNoContent
		return res, nil
	}
	b, err := json.Marshal(out, json.Deterministic(true))
	if err != nil {
		return res, fmt.Errorf("httpapi: encode response: %w", err)
	}
	res.Header.Set("Content-Type", "application/json")
	res.Body = append(b, '\n')
	return res, nil
}

// Write writes a rendered response; every response is Cache-Control:
// no-store.
func Write(w http.ResponseWriter, r *http.Request, res Rendered) {
	if res.Stream != nil {
		res.Stream.ServeHTTP(w, r)
		return
	}
	for k, vals := range res.Header {
		w.Header()[k] = vals
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(res.Status)
	if r.Method != http.MethodHead && res.Body != nil {
		_, _ = w.Write(res.Body)
	}
}

// Writer writes the results and errors of one socket's handlers.
type Writer struct {
	// Log receives every error that maps to no code; never a token, a
	// digest or a request body. Nil discards.
	Log *slog.Logger
	// Failed is the log line's message ("management request failed").
	Failed string
	// Caller, when set, names the caller in that log line (an actor such
	// as operator:<name>).
	Caller func(r *http.Request) string
	// Bare keeps the kernel's refusals of authority bare: the socket
	// answers unauthorized, forbidden and authority_released with the
	// generic message only (the toolbelt socket).
	Bare bool
	// Refused, when set, is told the code of every error written (the
	// daemon's refusal metrics).
	Refused func(code string)
}

// Result renders out and writes it, or the error rendering it failed with.
func (wr Writer) Result(w http.ResponseWriter, r *http.Request, out any) {
	res, err := Render(r, out)
	if err != nil {
		wr.Error(w, r, err)
		return
	}
	Write(w, r, res)
}

// Error writes err as the API's envelope, with the headers the error
// carries. An error that maps to no code is a 500 with a generic message;
// its text is logged, never sent.
func (wr Writer) Error(w http.ResponseWriter, r *http.Request, err error) {
	status, code, msg, known := classify(err, wr.Bare)
	if !known && wr.Log != nil {
		attrs := []any{"method", r.Method, "route", r.Pattern}
		if wr.Caller != nil {
			attrs = append(attrs, "principal", wr.Caller(r))
		}
		wr.Log.Error(wr.Failed, append(attrs, "error", err.Error())...)
	}
	if wr.Refused != nil {
		wr.Refused(code)
	}
	body := api.ErrorBody{Code: code, Message: msg}
	h := w.Header()
	if pe := (*Error)(nil); known && errors.As(err, &pe) {
		body.Diagnostics = pe.Diagnostics
		for k, vals := range pe.Header {
			h[k] = slices.Clone(vals)
		}
	}
	b, merr := json.Marshal(api.ErrorEnvelope{Error: body})
	if merr != nil {
		b = []byte(`{"error":{"code":"internal","message":"` + internalMessage + `"}}`)
	}
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Del("ETag")
	if status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="open-conduit"`)
	}
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(append(b, '\n'))
	}
}
