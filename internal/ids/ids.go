// Package ids makes the opaque, sortable identifiers of Open Conduit's
// records: a type prefix and a ULID (evt_01J…, wrk_01J…).
//
// It must never read the system clock or the system random source itself;
// both are given to a Generator so that identifiers are reproducible in tests.
package ids

import (
	"crypto/sha256"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/open-conduit/open-conduit/internal/clock"
)

// Prefixes of the record types.
const (
	Event      = "evt"
	Work       = "wrk"
	Execution  = "exe"
	Token      = "tok"
	Wait       = "wat"
	Timer      = "tmr"
	Artifact   = "art"
	Operator   = "opr"
	Generation = "gen"
	Input      = "inp"
	Request    = "req"
	Approval   = "apr"
)

// Generator makes identifiers from an injected clock and entropy source. IDs
// from one Generator are strictly increasing, even within one millisecond.
type Generator struct {
	clock   clock.Clock
	mu      sync.Mutex
	entropy io.Reader
}

// NewGenerator returns a Generator using c for time and r for randomness.
func NewGenerator(c clock.Clock, r io.Reader) *Generator {
	return &Generator{clock: c, entropy: ulid.Monotonic(r, 0)}
}

// New returns a fresh identifier with the given prefix.
func (g *Generator) New(prefix string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	id, err := ulid.New(ulid.Timestamp(g.clock.Now()), g.entropy)
	if err != nil {
		// The monotonic reader fails only when one millisecond has used up
		// its 80 random bits, or the entropy source itself failed; both are
		// unrecoverable for an identifier source.
		panic("ids: entropy source failed: " + err.Error())
	}
	return prefix + "_" + strings.ToLower(id.String())
}

// Derive returns a stable identifier with the given prefix derived from the
// parts, so that a retried request names the same record. The parts are
// joined unambiguously before hashing. A derived identifier does not sort
// by creation: with a non-zero at (a time that is itself stable across
// retries, such as the parent record's creation time) the ULID's time field
// is at, so it sorts near its parent; with the zero time every bit comes
// from the hash.
func Derive(prefix string, at time.Time, parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		var n [8]byte
		l := uint64(len(p))
		for i := range n {
			n[i] = byte(l >> (8 * i))
		}
		h.Write(n[:])
		h.Write([]byte(p))
	}
	sum := h.Sum(nil)
	var id ulid.ULID
	if at.IsZero() {
		copy(id[:], sum)
	} else {
		_ = id.SetTime(ulid.Timestamp(at))
		_ = id.SetEntropy(sum[:10])
	}
	return prefix + "_" + strings.ToLower(id.String())
}

// HasPrefix reports whether id carries the given type prefix.
func HasPrefix(id, prefix string) bool {
	return strings.HasPrefix(id, prefix+"_")
}
