package logfollow

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestTail(t *testing.T) {
	cases := []struct {
		body string
		n    int
		want string
	}{
		{"a\nb\nc\n", 1, "c\n"},
		{"a\nb\nc\n", 2, "b\nc\n"},
		{"a\nb\nc", 1, "c"},
		{"a\nb\nc", 2, "b\nc"},
		{"a\nb\nc\n", 5, "a\nb\nc\n"},
		{"a\nb\nc\n", 0, "a\nb\nc\n"},
		{"", 3, ""},
		{"\n\n", 1, "\n"},
		{strings.Repeat("x", 40<<10) + "\nlast\n", 1, "last\n"},
		{"first\n" + strings.Repeat("y", 70<<10) + "\n", 1, strings.Repeat("y", 70<<10) + "\n"},
	}
	for _, tc := range cases {
		path := filepath.Join(t.TempDir(), "log")
		if err := os.WriteFile(path, []byte(tc.body), 0o600); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		if err := Follow(context.Background(), path, &b, Options{Tail: tc.n}); err != nil {
			t.Fatal(err)
		}
		if b.String() != tc.want {
			t.Errorf("tail %d of %.20q = %.20q, want %.20q", tc.n, tc.body, b.String(), tc.want)
		}
	}
}

// syncWriter is a strings.Builder safe to read while Follow writes.
type syncWriter struct {
	mu sync.Mutex
	b  strings.Builder
	ch chan struct{}
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.b.Write(p)
	select {
	case w.ch <- struct{}{}:
	default:
	}
	return n, err
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// A writer that closed the log before the watch began sends no event:
// the recheck asks Ended, and Follow writes what remains and returns.
func TestFollowEndsOnTheRecheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(path, []byte("done\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tick := make(chan time.Time)
	var mu sync.Mutex
	ended := false
	asked := make(chan bool)
	w := &syncWriter{ch: make(chan struct{}, 1)}
	errc := make(chan error, 1)
	go func() {
		errc <- Follow(context.Background(), path, w, Options{Follow: true,
			Ended: func() bool {
				mu.Lock()
				e := ended
				mu.Unlock()
				asked <- e
				return e
			},
			NewTicker: func(time.Duration) (<-chan time.Time, func()) { return tick, func() {} }})
	}()
	<-w.ch
	tick <- time.Time{} // not ended yet: Follow goes on
	<-asked
	select {
	case err := <-errc:
		t.Fatalf("Follow returned before its writer ended: %v", err)
	default:
	}
	mu.Lock()
	ended = true
	mu.Unlock()
	tick <- time.Time{}
	<-asked
	select {
	case err := <-errc:
		if err != nil || w.String() != "done\n" {
			t.Fatalf("Follow = %v, wrote %q", err, w.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Follow did not end on the recheck")
	}
}

// Stop ends a follow whose writer goes on.
func TestFollowStops(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	stop := make(chan struct{})
	close(stop)
	err = Follow(context.Background(), path, &strings.Builder{}, Options{Follow: true, Ended: func() bool { return false }, Stop: stop})
	if err != ErrStopped {
		t.Fatalf("Follow = %v, want ErrStopped", err)
	}
}
