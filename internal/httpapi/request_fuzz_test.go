package httpapi

import (
	"bytes"
	stdjson "encoding/json"
	"errors"
	"testing"
)

// FuzzStrictJSON checks the strict request decoder against the standard
// library: whatever it accepts is exactly one valid JSON object with no
// null and no duplicate member, its canonical hash is stable under
// re-encoding, and every refusal is a safe invalid_request.
func FuzzStrictJSON(f *testing.F) {
	for _, seed := range []string{
		`{}`, `{"a":1}`, `{"a":null}`, `{"a":1,"a":2}`, `[]`, `{} {}`, `{"a":{"b":[1,2,{"c":"d"}]}}`,
		`{"a":"\u0000"}`, "{\"a\":\"\xff\"}", `{"a":1e400}`, ` { "b" : true , "a" : false } `, `nul`, ``,
		`{"a":[null]}`, `{"\u0061":1,"a":2}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h1, err := strictJSON(b)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) || pe.Code != CodeInvalidRequest || pe.Message == "" {
				t.Fatalf("refusal %v is not a safe invalid_request", err)
			}
			return
		}
		if !stdjson.Valid(b) {
			t.Fatalf("accepted invalid JSON %q", b)
		}
		var top any
		dec := stdjson.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if err := dec.Decode(&top); err != nil {
			t.Fatalf("accepted %q that the standard library refuses: %v", b, err)
		}
		if _, ok := top.(map[string]any); !ok {
			t.Fatalf("accepted a non-object %q", b)
		}
		if hasNull(top) {
			t.Fatalf("accepted a null in %q", b)
		}
		// Re-encoding the value (other whitespace, sorted keys, other
		// escapes) keeps the hash.
		again, err := stdjson.Marshal(top)
		if err != nil {
			t.Fatalf("re-encoding accepted %q: %v", b, err)
		}
		h2, err := strictJSON(again)
		if err != nil {
			t.Fatalf("re-encoding %q of accepted %q is refused: %v", again, b, err)
		}
		if h1 != h2 {
			t.Fatalf("hash of %q differs from its re-encoding %q", b, again)
		}
	})
}

func hasNull(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]any:
		for _, e := range x {
			if hasNull(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if hasNull(e) {
				return true
			}
		}
	}
	return false
}
