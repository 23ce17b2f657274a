package httpapi

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// ReadJSON keeps ReadBody's discipline whole: the same body back, and the
// same refusal (code and message) for every body ReadBody refuses; it
// only skips the hash.
func TestReadJSONRefusesWhatReadBodyRefuses(t *testing.T) {
	for _, c := range []struct{ body, contentType, query string }{
		{`{"operation":"emit","input":{"type":"a.b"}}`, "application/json", ""},
		{` { "b" : true , "a" : false } `, "application/json; charset=utf-8", ""},
		{``, "application/json", ""},
		{`{"a":null}`, "application/json", ""},
		{`{"a":1,"a":2}`, "application/json", ""},
		{`{"a":1e400}`, "application/json", ""},
		{`[]`, "application/json", ""},
		{`{} {}`, "application/json", ""},
		{"{\"a\":\"\xff\"}", "application/json", ""},
		{`{}`, "text/plain", ""},
		{`{}`, "application/json", "x=1"},
		{`{"a":"` + strings.Repeat("x", MaxBody) + `"}`, "application/json", ""},
	} {
		req := func() *http.Request {
			r := httptest.NewRequest(http.MethodPost, "/v1/toolbelt/call", strings.NewReader(c.body))
			r.URL.RawQuery = c.query
			r.Header.Set("Content-Type", c.contentType)
			return r
		}
		want, hash, werr := ReadBody(httptest.NewRecorder(), req())
		got, gerr := ReadJSON(httptest.NewRecorder(), req())
		var we, ge *Error
		switch {
		case werr == nil && gerr == nil:
			if string(got) != string(want) || hash == "" {
				t.Errorf("%.40q: ReadJSON read %.40q, ReadBody %.40q (hash %q)", c.body, got, want, hash)
			}
		case werr == nil || gerr == nil:
			t.Errorf("%.40q: ReadBody %v, ReadJSON %v", c.body, werr, gerr)
		case !errors.As(werr, &we) || !errors.As(gerr, &ge) || we.Code != ge.Code || we.Message != ge.Message:
			t.Errorf("%.40q: ReadBody refused %v, ReadJSON %v", c.body, werr, gerr)
		}
	}
}
