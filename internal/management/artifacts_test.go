package management

import (
	"errors"
	"fmt"
	"testing"

	"github.com/open-conduit/open-conduit/internal/httpapi"
)

func TestParseRange(t *testing.T) {
	cases := []struct {
		header     string
		size       int64
		start, end int64
		partial    bool
		refused    bool
	}{
		{"", 10, 0, 0, false, false},
		{"items=0-1", 10, 0, 0, false, false},
		{"bytes=0-0", 10, 0, 0, true, false},
		{"bytes=2-5", 10, 2, 5, true, false},
		{"bytes=2-", 10, 2, 9, true, false},
		{"bytes=-3", 10, 7, 9, true, false},
		{"bytes=-30", 10, 0, 9, true, false},
		{"bytes=8-100", 10, 8, 9, true, false},
		{" bytes = 1-2 ", 10, 1, 2, true, false},
		{"bytes=10-", 10, 0, 0, false, true},
		{"bytes=5-2", 10, 0, 0, false, true},
		{"bytes=-0", 10, 0, 0, false, true},
		{"bytes=-1", 0, 0, 0, false, true},
		{"bytes=0-", 0, 0, 0, false, true},
		{"bytes=0-1,3-4", 10, 0, 0, false, true},
		{"bytes=+1-2", 10, 0, 0, false, true},
		{"bytes=1", 10, 0, 0, false, true},
		{"bytes=99999999999999999999-", 10, 0, 0, false, true},
	}
	for _, tc := range cases {
		br, partial, err := parseRange(tc.header, tc.size)
		var pe *httpapi.Error
		refused := errors.As(err, &pe) && pe.Code == httpapi.CodeRangeNotSatisfiable
		if refused != tc.refused || partial != tc.partial || (partial && (br.Start != tc.start || br.End != tc.end)) {
			t.Errorf("parseRange(%q, %d) = %+v %v %v", tc.header, tc.size, br, partial, err)
		}
	}
}

// FuzzParseRange checks that any header either selects bytes inside the
// body or is refused with range_not_satisfiable, and never anything else.
func FuzzParseRange(f *testing.F) {
	for _, s := range []string{"bytes=0-1", "bytes=-5", "bytes=3-", "bytes=1-2,3-4", "bytes=x", "items=1-2", ""} {
		f.Add(s, int64(10))
	}
	f.Fuzz(func(t *testing.T, header string, size int64) {
		if size < 0 {
			size = -size
		}
		if size < 0 {
			return
		}
		br, partial, err := parseRange(header, size)
		if err != nil {
			var pe *httpapi.Error
			if !errors.As(err, &pe) || pe.Code != httpapi.CodeRangeNotSatisfiable || partial {
				t.Fatalf("parseRange(%q, %d): %v", header, size, err)
			}
			return
		}
		if partial && (br.Start < 0 || br.Start > br.End || br.End >= size) {
			t.Fatalf("parseRange(%q, %d) = %s outside the body", header, size, fmt.Sprint(br))
		}
	})
}
