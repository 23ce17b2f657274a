package management

import (
	"encoding/base64"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/httpapi"
)

// fuzzFilters stand for a listing's filters: the caller's query values.
type fuzzFilters struct {
	Scope string `json:"scope"`
	Type  string `json:"type"`
}

// cursorCodes are the only codes a cursor is refused with.
var cursorCodes = map[httpapi.Code]bool{
	httpapi.CodeInvalidCursor: true, httpapi.CodeCursorMismatch: true, httpapi.CodeCursorExpired: true, httpapi.CodeInvalidRequest: true,
}

func wantCursorRefusal(t *testing.T, err error, what string) httpapi.Code {
	t.Helper()
	var pe *httpapi.Error
	if !errors.As(err, &pe) || !cursorCodes[pe.Code] || pe.Message == "" {
		t.Fatalf("%s: refused with %v, which is not a stable cursor code", what, err)
	}
	return pe.Code
}

// FuzzDecodeCursor: any string, and any payload under a valid MAC, is
// decoded or refused with a stable code (never a failure that maps to
// 500); a cursor the codec issued is accepted for its own listing only,
// refused cursor_mismatch for other filters and other endpoints. Its seed
// corpus is in testdata/fuzz/FuzzDecodeCursor.
func FuzzDecodeCursor(f *testing.F) {
	f.Add("", []byte(`{}`), "s1", "t", "s2")
	f.Add("e30.AAAA", []byte(`{"v":1,"e":"","f":"","x":0,"k":{}}`), "\xff", "", "s1")
	f.Add("not a cursor", []byte(`{"v":1,"e":"x","f":"y","x":99999999999999,"k":{"b":1,"a":2}}`), "s1", "\xc3", "s1")
	f.Add("..", []byte(`{"v":2}`), "", "", "")
	f.Add("a.b.c", []byte(`{"v":1,"k":[]}`), "a", "b", "a")
	f.Fuzz(func(t *testing.T, cursor string, payload []byte, scope, typ, other string) {
		fake := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
		c, err := NewCursors(make([]byte, 32), nil, fake)
		if err != nil {
			t.Fatal(err)
		}
		list := httptest.NewRequest("GET", "/v1/events", nil)
		filters := fuzzFilters{Scope: scope, Type: typ}

		// Any string.
		if _, err := DecodeCursor[seqKey](c, list, filters, cursor); err != nil {
			wantCursorRefusal(t, err, "an arbitrary cursor")
		}
		// Any payload under a valid MAC.
		enc := base64.RawURLEncoding
		signed := enc.EncodeToString(payload) + "." + enc.EncodeToString(c.mac(payload))
		if _, err := DecodeCursor[seqKey](c, list, filters, signed); err != nil {
			wantCursorRefusal(t, err, "a signed payload")
		}
		if _, err := DecodeCursor[posKey](c, list, filters, signed); err != nil {
			wantCursorRefusal(t, err, "a signed payload as another key type")
		}

		// A cursor the codec issued.
		issued, err := EncodeCursor(c, list, filters, Keyset[seqKey]{Bound: 9, After: 3})
		if err != nil {
			wantCursorRefusal(t, err, "encoding under the filters")
			return
		}
		ks, err := DecodeCursor[seqKey](c, list, filters, issued)
		if err != nil || ks.Bound != 9 || ks.After != 3 {
			t.Fatalf("an issued cursor decodes to %+v, %v", ks, err)
		}
		if other != scope {
			_, err := DecodeCursor[seqKey](c, list, fuzzFilters{Scope: other, Type: typ}, issued)
			if err == nil {
				t.Fatal("an issued cursor is accepted under other filters")
			}
			if code := wantCursorRefusal(t, err, "other filters"); code != httpapi.CodeCursorMismatch && code != httpapi.CodeInvalidRequest {
				t.Fatalf("other filters: %s, want cursor_mismatch", code)
			}
		}
		for _, ep := range []struct{ method, path string }{{"GET", "/v1/work"}, {"POST", "/v1/events"}, {"GET", "/v1/events/"}} {
			_, err := DecodeCursor[seqKey](c, httptest.NewRequest(ep.method, ep.path, nil), filters, issued)
			if code := wantCursorRefusal(t, err, "another endpoint"); code != httpapi.CodeCursorMismatch {
				t.Fatalf("%s %s: %s, want cursor_mismatch", ep.method, ep.path, code)
			}
		}
		fake.Advance(CursorLifetime)
		_, err = DecodeCursor[seqKey](c, list, filters, issued)
		if code := wantCursorRefusal(t, err, "an old cursor"); code != httpapi.CodeCursorExpired {
			t.Fatalf("an expired cursor: %s, want cursor_expired", code)
		}
	})
}
