package config

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/open-conduit/open-conduit/internal/executor"
)

// Version is the only configuration version this release reads.
const Version = 1

// Config is a parsed configuration with its defaults applied: what the
// operator wrote, with toolsets and denials in operation lists as written.
// Treat it as read-only.
type Config struct {
	Version    int
	Limits     Limits
	Ingress    Ingress
	Secrets    map[string]SecretRef // secret name -> reference
	Extensions map[string]Extension // registration name -> entry
	Scopes     map[string]*Scope    // scope id -> scope
}

// Limits bound causality and scheduling for the whole daemon.
type Limits struct {
	CausalMaxDepth  int           // causal_max_depth, default 8
	CausalPerMinute int           // causal_per_minute, default 60
	MaxRunning      int           // max_running, default 4
	AttemptTimeout  time.Duration // attempt_timeout, default 1h
	Lease           time.Duration // lease, default 30s
}

// DefaultLimits returns the limits of a configuration that names none.
func DefaultLimits() Limits {
	return Limits{CausalMaxDepth: 8, CausalPerMinute: 60, MaxRunning: 4, AttemptTimeout: time.Hour, Lease: 30 * time.Second}
}

// Ingress is the daemon's one webhook listener (the top-level ingress
// member), on which every webhook ingress an extension's config turns on
// is served at its own path. It listens only while one is on.
type Ingress struct {
	// Listen is host:port, the host an IP address or localhost; "" when
	// the configuration names none (then an ingress's own deprecated
	// listen member, else 127.0.0.1:8787).
	Listen string
	// AllowNonLoopback lets Listen name an address other than loopback.
	AllowNonLoopback bool
}

// Extension is an extensions entry: whether the extension is enabled and
// for which scopes, and its own configuration. Scopes is nil when the
// entry names none, which means every scope. Config is the entry's config
// in canonical JSON, nil when it has none.
type Extension struct {
	Enabled bool
	Scopes  []string
	Config  json.RawMessage
}

// Scope is a configured area of authority.
type Scope struct {
	ID            string
	Parent        string // "" for a root scope
	Enabled       bool   // default true
	Removed       bool   // default false; a removed scope is a tombstone
	Authorization Authorization
	Bindings      map[string]*Binding
	Routes        []Route
}

// Authorization is a scope's ceiling as written.
type Authorization struct {
	Operations []string // operation names, @toolsets, !denials
	Reads      []string // from the fixed set of reads
	// Emit lists the event families the scope's executions may emit; nil
	// when the member is absent (the parent's rule applies, and a root
	// scope allows any family the toolbelt allows).
	Emit []string
	// Egress lists the host:port entries the scope's bindings' egress
	// stays within; nil when the member is absent (the parent's rule
	// applies, and a root scope sets no ceiling).
	Egress []string
}

// The reads a scope may authorize.
const (
	ReadWork       = "work"
	ReadEvents     = "events"
	ReadExecutions = "executions"
	ReadArtifacts  = "artifacts"
	ReadWaits      = "waits"
)

// Reads is the fixed set of reads, in order.
var Reads = []string{ReadWork, ReadEvents, ReadExecutions, ReadArtifacts, ReadWaits}

// Binding says how a scope runs Work.
type Binding struct {
	ID         string
	Executor   string
	Config     json.RawMessage // the executor's config, canonical JSON; {} by default
	Operations []string
	Secrets    map[string]string // environment variable -> secret name
	Grants     map[string]Grant
	Requires   []executor.Capability
	Playbook   string
	// Egress lists the host:port entries an execution of the binding may
	// reach through the egress proxy (docs/egress.md), normalized.
	Egress []string
}

// Grant is a named extra set of operations a Work on the binding may take.
type Grant struct {
	ID         string
	Operations []string
}

// Effect is what a matching route does with an Event.
type Effect string

// The route effects.
const (
	// EffectStart starts new Work on the route's binding, or queues the
	// Event as input to the nonterminal Work that owns its correlation key.
	EffectStart Effect = "start"
	// EffectQueue only delivers the Event to the nonterminal Work that owns
	// its key; with no such Work it does nothing.
	EffectQueue Effect = "queue"
	// EffectDrop consumes the Event and does nothing.
	EffectDrop Effect = "drop"
	// EffectInject delivers the Event to the key owner's running attempt
	// as new input without stopping it (queue when none runs).
	EffectInject Effect = "inject"
	// EffectInterrupt fences the key owner's running attempt and starts
	// the next one with the Event as input (queue when none runs).
	EffectInterrupt Effect = "interrupt"
)

// Route is an ordered rule of a scope.
type Route struct {
	ID      string
	Match   Match
	Binding string // required for start; optional for the others
	Effect  Effect // default start
	// Samples are the route's named sample Events, in document order.
	Samples []Sample
}

// Sample is a named sample Event a route offers: what an operator traces
// by name. It is an Event the route matches.
type Sample struct {
	Name string
	Type string
	// Source is empty for core.manual.
	Source         string
	CorrelationKey string
	// Data is a canonical JSON object, nil when the sample has none.
	Data json.RawMessage
}

// Match selects Events by type (exact a.b, or prefix a.*) and, optionally,
// exact source.
type Match struct {
	Type   string
	Source string
}

// Matches reports whether an Event of type typ from source src matches.
func (m Match) Matches(typ, src string) bool {
	if m.Source != "" && m.Source != src {
		return false
	}
	if prefix, ok := cutPrefixPattern(m.Type); ok {
		return len(typ) > len(prefix) && typ[:len(prefix)] == prefix
	}
	return typ == m.Type
}

// cutPrefixPattern returns "a.b." for the pattern "a.b.*".
func cutPrefixPattern(t string) (string, bool) {
	if len(t) >= 2 && t[len(t)-2:] == ".*" {
		return t[:len(t)-1], true
	}
	return "", false
}

// Parse reads a version 1 configuration strictly from r: at most MaxSize
// bytes, one JSON object, no duplicate keys, unknown fields, nulls or wrong
// types, and values of the right shape. It returns the config with its
// defaults applied, or an *Error holding every diagnostic. It checks nothing
// that needs a registry; Validate does.
func Parse(r io.Reader) (*Config, error) {
	data, err := readLimited(r)
	if err != nil {
		return nil, fmt.Errorf("config: reading: %w", err)
	}
	return ParseBytes(data)
}

// ParseBytes is Parse on bytes already read.
func ParseBytes(data []byte) (*Config, error) {
	var is issues
	doc := parseDocument(data, &is)
	if len(is.list) > 0 {
		return nil, &Error{Diagnostics: is.render()}
	}
	return doc.config(), nil
}

// ReadFile loads a configuration file's bytes for Parse or Validate. It
// reads at most one byte more than MaxSize, so that an oversized file is
// reported as too_large rather than read whole.
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readLimited(f)
}

// readLimited reads at most one byte more than MaxSize.
func readLimited(r io.Reader) ([]byte, error) {
	return io.ReadAll(io.LimitReader(r, MaxSize+1))
}
