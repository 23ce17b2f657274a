package proc

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCappedLog(t *testing.T) {
	tests := []struct {
		name   string
		limit  int64
		writes []string
		want   string
	}{
		{"under the limit", 10, []string{"abc", "def"}, "abcdef"},
		{"exactly the limit", 6, []string{"abc", "def"}, "abcdef"},
		{"cut inside a write", 4, []string{"abc", "def", "ghi"}, "abcd" + truncationMarker(4)},
		{"cut at a write boundary", 3, []string{"abc", "def"}, "abc" + truncationMarker(3)},
		// "é" is two bytes; a cut between them would leave invalid UTF-8.
		{"cut before a split rune", 4, []string{"abcé"}, "abc" + truncationMarker(4)},
		{"cut after a whole rune", 5, []string{"abcéx"}, "abcé" + truncationMarker(5)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			l := &cappedLog{w: &buf, limit: tt.limit}
			for _, w := range tt.writes {
				if n, err := l.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write = %d, %v: it must take everything", n, err)
				}
			}
			if buf.String() != tt.want {
				t.Errorf("log = %q, want %q", buf.String(), tt.want)
			}
			if l.truncated != strings.Contains(tt.want, "[open-conduit:") {
				t.Errorf("truncated = %v", l.truncated)
			}
			if !utf8.Valid(buf.Bytes()) {
				t.Error("the log is not valid UTF-8")
			}
		})
	}
}

type failingWriter struct{ n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	w.n++
	return 0, errors.New("disk full")
}

func TestCappedLogKeepsDrainingAfterAWriteError(t *testing.T) {
	w := &failingWriter{}
	l := &cappedLog{w: w, limit: 100}
	for range 3 {
		if n, err := l.Write([]byte("abc")); n != 3 || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if l.err == nil || w.n != 1 {
		t.Errorf("err = %v after %d writes to the file, want the first error and no retries", l.err, w.n)
	}
}
