// Package clock supplies the time and randomness that the rest of Open
// Conduit is given instead of reading them from the system, so that expiry,
// leases, timers and sweeps can be tested by moving a fake clock forward.
//
// It must never sleep on behalf of a caller: code that waits for a deadline
// asks the clock for the time and is driven by its loop, not by time.Sleep.
package clock

import (
	"crypto/rand"
	"io"
	"sync"
	"time"
)

// Clock tells the current time.
type Clock interface {
	Now() time.Time
}

// System is the real clock, in UTC.
type System struct{}

// Now returns the current time in UTC.
func (System) Now() time.Time { return time.Now().UTC() }

// Fake is a clock that only moves when told to. It is safe for concurrent use.
type Fake struct {
	mu  sync.Mutex
	now time.Time
}

// NewFake returns a fake clock set to start.
func NewFake(start time.Time) *Fake { return &Fake{now: start.UTC()} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Advance moves the fake time forward by d and returns the new time.
func (f *Fake) Advance(d time.Duration) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	return f.now
}

// Set moves the fake time to t.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = t.UTC()
}

// Entropy is the source of randomness for identifiers and tokens. Production
// code uses crypto/rand; tests may inject a deterministic reader.
type Entropy = io.Reader

// SystemEntropy returns the operating system's cryptographic random source.
func SystemEntropy() Entropy { return rand.Reader }
