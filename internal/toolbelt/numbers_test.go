package toolbelt_test

import (
	"testing"
)

// TestInputNumbersAFloatCannotHold: an in-process call (MCP, an
// extension) is held to the socket's number rule: an input number a
// float64 cannot hold is invalid_request, never stored as sent, so two
// different ones can never be the same request.
func TestInputNumbersAFloatCannotHold(t *testing.T) {
	f := fixture(t, false)
	a, err := f.Start()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"1e400", "2e400", "-1e400", "1e-400", "-0.5e-330"} {
		_, err := f.Call(a.Token, "emit", `{"type":"test.n","data":{"n":`+n+`}}`, "same-id")
		mustCode(t, err, "invalid_request")
	}
	for _, n := range []string{"0", "-0.0", "0e400", "1.7976931348623157e308", "5e-324", "123456789012345678901234567890"} {
		if _, err := f.Call(a.Token, "emit", `{"type":"test.n","data":{"n":`+n+`}}`, ""); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	if evs, err := f.Events("test.n"); err != nil || len(evs) != 6 {
		t.Fatalf("%d events, %v; want the 6 numbers a float64 holds", len(evs), err)
	}
}
