package pkgproto_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/packages"
	"github.com/open-conduit/open-conduit/internal/packages/pkgproto"
)

// needPython skips without python3 (failing under CI=true, where .ci/run
// installs it).
func needPython(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3 is not installed; .ci/run installs it")
		}
		t.Skip("python3 is not installed: apt-get install python3")
	}
}

// pyecho is the Python test package as installed, every permission it asks
// for accepted.
func pyecho(t *testing.T) packages.Installed {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "pypkg"))
	if err != nil {
		t.Fatal(err)
	}
	ins, err := pyechoAt(dir)
	if err != nil {
		t.Fatal(err)
	}
	return ins
}

func pyechoAt(dir string) (packages.Installed, error) {
	raw, err := os.ReadFile(filepath.Join(dir, packages.ManifestFile))
	if err != nil {
		return packages.Installed{}, err
	}
	var m packages.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return packages.Installed{}, err
	}
	return packages.Installed{Manifest: m, Dir: dir, Digest: "sha256:test", Accepted: m.Permissions}, nil
}

// timers is a fake of Options.After: nothing fires until the test fires
// it.
type timers struct {
	mu      sync.Mutex
	pending []*timer
	set     int
}

type timer struct {
	d   time.Duration
	seq int
	ch  chan time.Time
}

func (f *timers) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.set++
	tm := &timer{d: d, seq: f.set, ch: make(chan time.Time, 1)}
	f.pending = append(f.pending, tm)
	return tm.ch
}

// mark is how many timers have been set so far.
func (f *timers) mark() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.set
}

// fire fires the oldest pending timer of duration d, waiting (within a
// generous bound) for one to be set.
func (f *timers) fire(t *testing.T, d time.Duration) {
	t.Helper()
	f.fireSince(t, d, 0)
}

// fireSince fires the oldest pending timer of duration d set after mark,
// waiting (within a generous bound) for one to be set.
func (f *timers) fireSince(t *testing.T, d time.Duration, mark int) {
	t.Helper()
	eventually(t, "a timer of "+d.String(), func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		for k, tm := range f.pending {
			if tm.d == d && tm.seq > mark {
				f.pending = append(f.pending[:k], f.pending[k+1:]...)
				tm.ch <- time.Time{}
				return true
			}
		}
		return false
	})
}

// has reports whether a timer of duration d is pending.
func (f *timers) has(d time.Duration) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, tm := range f.pending {
		if tm.d == d {
			return true
		}
	}
	return false
}

// eventually polls cond for a real event, failing after a generous bound.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// logBuffer is a slog sink the tests read.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(b)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// The fake timers' distinct durations, so a test fires the one it means.
const (
	gateTimeout = 7 * time.Second
	callTimeout = 30 * time.Second
	stopTimeout = 5 * time.Second
	backoff     = time.Second
)

type harness struct {
	rt     *pkgproto.Runtime
	timers *timers
	clock  *clock.Fake
	log    *logBuffer
}

func newHarness() *harness {
	h := &harness{timers: &timers{}, clock: clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)), log: &logBuffer{}}
	h.rt = pkgproto.NewRuntime(pkgproto.Options{
		Clock: h.clock, After: h.timers.After, Logger: slog.New(slog.NewTextHandler(h.log, nil)),
		CallTimeout: callTimeout, GateTimeout: gateTimeout, StopTimeout: stopTimeout, StartTimeout: 11 * time.Second,
		BackoffInitial: backoff, BackoffMax: 8 * time.Second, CrashLoopCount: 3, CrashLoopWindow: time.Minute,
		HostVersion: "test",
	})
	return h
}

func (h *harness) start(t *testing.T, ins packages.Installed) *pkgproto.Instance {
	t.Helper()
	inst, err := h.rt.Start(context.Background(), ins)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = inst.Stop(context.Background()) })
	return inst.(*pkgproto.Instance)
}
