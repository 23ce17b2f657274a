package config

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/open-conduit/open-conduit/internal/executor"
)

// Snapshot is a valid configuration as the host uses it: its canonical
// hash, its redacted normalized form, and each scope's effective authority
// with every operation list resolved against the registry it was validated
// with. It is immutable once built and safe to share between goroutines;
// never modify what its methods return.
type Snapshot struct {
	// Generation is the number the publisher gives the snapshot; Validate
	// leaves it zero.
	Generation int64
	// Hash is the hex SHA-256 of the configuration's canonical JSON (RFC
	// 8785: members sorted, no white space), so the same configuration has
	// the same hash whatever its key order or white space. Toolsets are
	// hashed as written, so a release that adds an operation to a toolset
	// keeps the hash.
	Hash string
	// Normalized is the configuration as written, in canonical JSON, with
	// each secret reference replaced by <scheme>:<redacted>. Toolsets are
	// unresolved and defaults are not filled in.
	Normalized json.RawMessage

	config *Config
	scopes map[string]*EffectiveScope
	order  []string
	// unlisted are the registered extensions a configuration without an
	// entry for them enables in every scope: all but the opt-in ones.
	unlisted map[string]bool
}

// EffectiveScope is a scope's resolved authority.
type EffectiveScope struct {
	ID      string
	Parent  string
	Enabled bool // as configured
	Removed bool
	// Active: enabled, not removed, and every ancestor active. An inactive
	// scope authorizes nothing.
	Active bool
	// Operations is the scope's ceiling, resolved: operation names only.
	Operations []string
	// Reads is the scope's read ceiling.
	Reads []string
	// EmitRestricted: the scope (or an ancestor) lists the event families
	// its executions may emit (authorization.emit), which are Emit,
	// sorted. Unrestricted, they may emit any family the toolbelt allows.
	EmitRestricted bool
	Emit           []string
	// EgressRestricted: the scope (or an ancestor) has an
	// authorization.egress, the ceiling Egress of its bindings' egress.
	EgressRestricted bool
	Egress           []EgressEntry
	// Bindings and Routes are nil for a removed scope: a tombstone runs
	// nothing.
	Bindings map[string]*EffectiveBinding
	Routes   []Route
}

// EffectiveBinding is a binding with its lists resolved and narrowed to its
// scope's ceiling.
type EffectiveBinding struct {
	ID       string
	Executor string
	Config   json.RawMessage
	// Operations the binding grants every attempt.
	Operations []string
	// Grants: extra operations a Work on the binding may take, by grant id.
	Grants map[string][]string
	// Secrets: environment variable -> secret name.
	Secrets  map[string]string
	Requires []executor.Capability
	Playbook string
	// PlaybookOperations are the operations the binding's playbook declares
	// it uses, when the registry knows the playbook.
	PlaybookOperations []string
	// Egress is what an execution of the binding may reach through the
	// egress proxy, within the scope's ceiling.
	Egress []EgressEntry
}

// DomainScope is a scope's metadata for the scope records, without any
// reference text.
type DomainScope struct {
	ID       string   `json:"id"`
	Parent   string   `json:"parent,omitempty"`
	Enabled  bool     `json:"enabled"`
	Removed  bool     `json:"removed"`
	Active   bool     `json:"active"`
	Bindings []string `json:"bindings"`
	Routes   []string `json:"routes"`
}

// Config returns the parsed configuration with defaults applied.
func (s *Snapshot) Config() *Config { return s.config }

// Limits returns the configuration's limits.
func (s *Snapshot) Limits() Limits { return s.config.Limits }

// Ingress is the webhook listener the configuration names.
func (s *Snapshot) Ingress() Ingress { return s.config.Ingress }

// Scope returns a scope's effective authority.
func (s *Snapshot) Scope(id string) (*EffectiveScope, bool) {
	sc, ok := s.scopes[id]
	return sc, ok
}

// Scopes returns every scope, tombstones included, sorted by id.
func (s *Snapshot) Scopes() []*EffectiveScope {
	out := make([]*EffectiveScope, len(s.order))
	for i, id := range s.order {
		out[i] = s.scopes[id]
	}
	return out
}

// DomainScopes returns the metadata of every scope, sorted by id.
func (s *Snapshot) DomainScopes() []DomainScope {
	out := make([]DomainScope, 0, len(s.order))
	for _, id := range s.order {
		sc := s.scopes[id]
		d := DomainScope{ID: id, Parent: sc.Parent, Enabled: sc.Enabled, Removed: sc.Removed, Active: sc.Active,
			Bindings: sortedKeys(sc.Bindings), Routes: []string{}}
		for _, r := range sc.Routes {
			d.Routes = append(d.Routes, r.ID)
		}
		out = append(out, d)
	}
	return out
}

// AuthorizeOperation reports whether the scope's current ceiling grants op:
// the scope is active and op is among its resolved operations.
func (s *Snapshot) AuthorizeOperation(scopeID, op string) bool {
	sc, ok := s.scopes[scopeID]
	return ok && sc.Active && slices.Contains(sc.Operations, op)
}

// AllowEmit reports whether the scope's executions may emit eventType by
// the configured rule (authorization.emit): the scope is active and, when
// restricted, the type's family (its first segment) is one it lists. The
// toolbelt's own rule (no core, no registration's family) applies besides.
func (s *Snapshot) AllowEmit(scopeID, eventType string) bool {
	sc, ok := s.scopes[scopeID]
	if !ok || !sc.Active {
		return false
	}
	family, _, _ := strings.Cut(eventType, ".")
	return !sc.EmitRestricted || slices.Contains(sc.Emit, family)
}

// AuthorizeRead reports whether the scope's current ceiling allows read.
func (s *Snapshot) AuthorizeRead(scopeID, read string) bool {
	sc, ok := s.scopes[scopeID]
	return ok && sc.Active && slices.Contains(sc.Reads, read)
}

func (s *Snapshot) binding(scopeID, bindingID string) (*EffectiveBinding, bool) {
	sc, ok := s.scopes[scopeID]
	if !ok || sc.Bindings == nil {
		return nil, false
	}
	b, ok := sc.Bindings[bindingID]
	return b, ok
}

// Binding returns a binding of a live scope.
func (s *Snapshot) Binding(scopeID, bindingID string) (*EffectiveBinding, bool) {
	return s.binding(scopeID, bindingID)
}

// BindingOperations returns the operations a binding grants every attempt,
// resolved and narrowed to its scope's ceiling.
func (s *Snapshot) BindingOperations(scopeID, bindingID string) ([]string, bool) {
	b, ok := s.binding(scopeID, bindingID)
	if !ok {
		return nil, false
	}
	return slices.Clone(b.Operations), true
}

// GrantOperations returns the operations of one of a binding's grants,
// resolved and narrowed to the scope's ceiling.
func (s *Snapshot) GrantOperations(scopeID, bindingID, grantID string) ([]string, bool) {
	b, ok := s.binding(scopeID, bindingID)
	if !ok {
		return nil, false
	}
	ops, ok := b.Grants[grantID]
	return slices.Clone(ops), ok
}

// BindingSecrets returns the binding's secret selection: environment
// variable -> secret name.
func (s *Snapshot) BindingSecrets(scopeID, bindingID string) (map[string]string, bool) {
	b, ok := s.binding(scopeID, bindingID)
	if !ok {
		return nil, false
	}
	out := make(map[string]string, len(b.Secrets))
	for k, v := range b.Secrets {
		out[k] = v
	}
	return out, true
}

// Secret returns a named secret's reference, for the resolver.
func (s *Snapshot) Secret(name string) (SecretRef, bool) {
	ref, ok := s.config.Secrets[name]
	return ref, ok
}

// SecretNames returns the configured secret names, sorted.
func (s *Snapshot) SecretNames() []string { return sortedKeys(s.config.Secrets) }

// ExtensionEnabled reports whether the configuration enables the extension,
// and for which scopes (nil: every scope). An entry says so itself; without
// one, an extension of the registry the snapshot was validated with is
// enabled in every scope unless it is opt-in (Registry.SetExtensionOptIn),
// and an extension the registry does not know is not enabled.
func (s *Snapshot) ExtensionEnabled(name string) (bool, []string) {
	e, ok := s.config.Extensions[name]
	if !ok {
		return s.unlisted[name], nil
	}
	if !e.Enabled {
		return false, nil
	}
	return true, slices.Clone(e.Scopes)
}

// Extension returns the configuration's entry of an extension (a copy) and
// whether there is one.
func (s *Snapshot) Extension(name string) (Extension, bool) {
	e, ok := s.config.Extensions[name]
	if !ok {
		return Extension{}, false
	}
	e.Scopes = slices.Clone(e.Scopes)
	e.Config = slices.Clone(e.Config)
	return e, true
}
