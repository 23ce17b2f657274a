package toolbelt

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/open-conduit/open-conduit/extension"
)

// Catalog is configuration's view of the registered extensions: the
// operations and toolsets against which validation resolves a binding's
// grants. *config.Registry implements it; the toolbelt never reads
// configuration through it.
type Catalog interface {
	// CheckExtension reports whether AddExtension would accept the
	// extension, changing nothing.
	CheckExtension(name string, operations []string, toolsets []extension.Toolset) error
	// AddExtension registers it; a refusal registers nothing.
	AddExtension(name string, operations []string, toolsets []extension.Toolset) error
	// SetExtensionConfig gives a registered extension the check of its
	// own configuration (extensions.<name>.config).
	SetExtensionConfig(name string, check func(config json.RawMessage) error) error
	// SetExtensionOptIn makes a registered extension opt-in: enabled only
	// where a configuration entry enables it.
	SetExtensionOptIn(name string) error
	// CheckPlaybooks reports whether AddPlaybooks would accept an
	// extension's playbooks, changing nothing.
	CheckPlaybooks(playbooks []extension.Playbook) error
	// AddPlaybooks registers them; a refusal registers none.
	AddPlaybooks(playbooks []extension.Playbook) error
}

// removalCatalog is a Catalog from which a registration can be removed
// again (*config.Registry is one).
type removalCatalog interface {
	RemoveExtension(name string) error
	RemovePlaybooks(names []string)
}

// inspectCatalog is a Catalog that also checks what an extension's
// accepted config refers to (*config.Registry is one).
type inspectCatalog interface {
	SetExtensionInspect(name string, inspect func(config json.RawMessage) extension.ConfigReport) error
}

// Enablement is what a configuration generation says of one registration:
// whether it is enabled, in which scopes (nil: every scope), and its own
// configuration (nil: {}).
type Enablement struct {
	Enabled bool
	Scopes  []string
	Config  json.RawMessage
}

// In reports whether the registration is enabled for scope.
func (e Enablement) In(scope string) bool {
	return e.Enabled && (e.Scopes == nil || slices.Contains(e.Scopes, scope))
}

// Extensions answers what a committed generation (0: the active one) says
// of a registration. The daemon adapts its configuration snapshots into
// it; the toolbelt never reads configuration itself.
type Extensions func(generation int64, registration string) Enablement

// everywhere is the Extensions of a host that follows no configuration:
// every registration is enabled in every scope, with no config.
func everywhere(int64, string) Enablement { return Enablement{Enabled: true} }

// Host is the extension host: the one place an extension is registered.
// Register takes a registration's operations and gate (served by every
// Toolbelt built on the host), its operator actions (served by Actions
// built on it) and gives the Catalog, when there is one, its operations,
// toolsets and playbooks, all at once: every part is checked before any is
// registered, so a refused registration registers nothing anywhere.
// Unregister takes one away again (an installed package's removal). It
// implements extension.Registrar and is safe for concurrent use, as
// *config.Registry is; a Catalog that is not must be registered with
// before configuration is read, and never unregistered from.
type Host struct {
	catalog Catalog

	follow sync.RWMutex
	exts   Extensions // what each generation says of a registration

	mu      sync.RWMutex
	regs    map[string]extension.Registration // by name
	ops     map[string]registered             // extension operations by name
	actions map[string]registeredAction       // by action name
}

type registered struct {
	reg string
	op  extension.Operation
}

type registeredAction struct {
	reg string
	act extension.Action
}

var _ extension.Registrar = (*Host)(nil)

// NewHost returns a host with no registrations. catalog, when not nil, is
// given every registration's operations and toolsets (the daemon passes
// the configuration registry); nil keeps them in the host alone (tests of
// the toolbelt).
func NewHost(catalog Catalog) *Host {
	return &Host{catalog: catalog, exts: everywhere, regs: map[string]extension.Registration{}, ops: map[string]registered{}, actions: map[string]registeredAction{}}
}

// Follow makes the host's registrations follow the configuration's
// generations through exts: a registration a generation disables (or
// does not enable for a scope) has its operations undeclared for the
// attempts pinned to that generation, and, when the active generation
// disables it, for every call; its gate is asked only for calls in the
// scopes the active generation enables it for, and its actions are
// served only there. Until Follow is called (nil: again), every
// registration is enabled in every scope.
func (h *Host) Follow(exts Extensions) {
	if exts == nil {
		exts = everywhere
	}
	h.follow.Lock()
	h.exts = exts
	h.follow.Unlock()
}

// enablement is what generation (0: the active one) says of reg.
func (h *Host) enablement(generation int64, reg string) Enablement {
	h.follow.RLock()
	exts := h.exts
	h.follow.RUnlock()
	return exts(generation, reg)
}

// enabledFor reports whether reg serves scope for an attempt pinned to
// generation: both that generation and the active one enable it there.
func (h *Host) enabledFor(generation int64, reg, scope string) bool {
	return h.enablement(generation, reg).In(scope) && (generation == 0 || h.enablement(0, reg).In(scope))
}

// configOf is reg's own configuration in the active generation ({} when
// it has none).
func (h *Host) configOf(reg string) json.RawMessage {
	c := h.enablement(0, reg).Config
	if len(c) == 0 {
		return json.RawMessage(`{}`)
	}
	return slices.Clone(c)
}

// Register registers an extension. The registration name follows
// extension.RegistrationName and is not a builtin's. Every operation must
// be <name>.<suffix> (extension.OwnsOperation) with a summary, an object
// input schema and exactly one of Handler and Emit, a Handler when it is
// sensitive; every action must be <name>.<suffix>, not the name of one of
// the registration's operations, with a summary, a handler and an object
// input schema; every toolset must pass extension.CheckToolset (else
// ErrInvalid, naming the part and why), as must every playbook
// extension.CheckPlaybook. A repeated registration name, a builtin's
// name, an operation, action or playbook listed twice or registered
// before is ErrConflict, as is whatever the Catalog refuses. A refused
// registration registers nothing anywhere.
func (h *Host) Register(reg extension.Registration) error {
	if err := checkRegistration(reg); err != nil {
		return err
	}
	opNames := make([]string, 0, len(reg.Operations))
	for _, op := range reg.Operations {
		opNames = append(opNames, op.Name)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, dup := h.regs[reg.Name]; dup {
		return fmt.Errorf("%w: registration %s is already registered", extension.ErrConflict, reg.Name)
	}
	for _, op := range reg.Operations {
		if other, dup := h.ops[op.Name]; dup {
			return fmt.Errorf("%w: operation %s is already registered by %s", extension.ErrConflict, op.Name, other.reg)
		}
	}
	for _, pb := range reg.Playbooks {
		for _, other := range h.regs {
			if slices.ContainsFunc(other.Playbooks, func(p extension.Playbook) bool { return p.Name == pb.Name }) {
				return fmt.Errorf("%w: playbook %s is already registered by %s", extension.ErrConflict, pb.Name, other.Name)
			}
		}
	}
	if h.catalog != nil {
		if err := h.catalog.CheckExtension(reg.Name, opNames, reg.Toolsets); err != nil {
			return fmt.Errorf("registration %s: %w", reg.Name, err)
		}
		if err := h.catalog.CheckPlaybooks(reg.Playbooks); err != nil {
			return fmt.Errorf("registration %s: %w", reg.Name, err)
		}
		// Checked under the host's lock: the Catalog's own checks passed
		// above, and neither Add registers anything when it refuses.
		if err := h.catalog.AddExtension(reg.Name, opNames, reg.Toolsets); err != nil {
			return fmt.Errorf("registration %s: %w", reg.Name, err)
		}
		if err := h.catalog.AddPlaybooks(reg.Playbooks); err != nil {
			return fmt.Errorf("registration %s: %w", reg.Name, err)
		}
		if reg.CheckConfig != nil {
			// Cannot fail: the extension was just added and the check is
			// set.
			if err := h.catalog.SetExtensionConfig(reg.Name, reg.CheckConfig); err != nil {
				return fmt.Errorf("registration %s: %w", reg.Name, err)
			}
		}
		if ins, ok := h.catalog.(inspectCatalog); ok && reg.InspectConfig != nil {
			// Cannot fail: the extension was just added.
			if err := ins.SetExtensionInspect(reg.Name, reg.InspectConfig); err != nil {
				return fmt.Errorf("registration %s: %w", reg.Name, err)
			}
		}
		if reg.OptIn {
			// Cannot fail either: the extension was just added.
			if err := h.catalog.SetExtensionOptIn(reg.Name); err != nil {
				return fmt.Errorf("registration %s: %w", reg.Name, err)
			}
		}
	}
	reg.Operations = slices.Clone(reg.Operations)
	reg.Playbooks = slices.Clone(reg.Playbooks)
	reg.Actions = slices.Clone(reg.Actions)
	h.regs[reg.Name] = reg
	for _, op := range reg.Operations {
		h.ops[op.Name] = registered{reg: reg.Name, op: op}
	}
	for _, act := range reg.Actions {
		h.actions[act.Name] = registeredAction{reg: reg.Name, act: act}
	}
	return nil
}

// Unregister removes the registration named name and everything it
// registered: its operations are undeclared again (a call to one is
// refused like a call to any unknown operation), its gate, start gate and
// actions are no longer asked or served, and the Catalog forgets its
// operations, toolsets and playbooks. Calls already running finish. It
// is ErrNotFound for a name not registered.
func (h *Host) Unregister(name string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	reg, ok := h.regs[name]
	if !ok {
		return fmt.Errorf("%w: registration %s is not registered", extension.ErrNotFound, name)
	}
	if h.catalog != nil {
		rc, ok := h.catalog.(removalCatalog)
		if !ok {
			return fmt.Errorf("%w: registration %s: the catalog cannot remove a registration", extension.ErrInvalid, name)
		}
		if err := rc.RemoveExtension(name); err != nil {
			return fmt.Errorf("registration %s: %w", name, err)
		}
		names := make([]string, 0, len(reg.Playbooks))
		for _, pb := range reg.Playbooks {
			names = append(names, pb.Name)
		}
		rc.RemovePlaybooks(names)
	}
	delete(h.regs, name)
	for _, op := range reg.Operations {
		delete(h.ops, op.Name)
	}
	for _, act := range reg.Actions {
		delete(h.actions, act.Name)
	}
	return nil
}

// Registered reports whether a registration of this name is registered.
func (h *Host) Registered(name string) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	_, ok := h.regs[name]
	return ok
}

// checkRegistration checks everything of a registration that does not
// depend on what is registered already.
func checkRegistration(reg extension.Registration) error {
	if err := extension.RegistrationName(reg.Name); err != nil {
		return fmt.Errorf("registration %q: %w", reg.Name, err)
	}
	if extension.IsBuiltin(reg.Name) {
		return fmt.Errorf("%w: registration %s takes the name of the builtin %s", extension.ErrConflict, reg.Name, reg.Name)
	}
	seen := map[string]bool{}
	for _, op := range reg.Operations {
		if extension.IsBuiltin(op.Name) {
			return fmt.Errorf("%w: registration %s: operation %s is a builtin of the host", extension.ErrConflict, reg.Name, op.Name)
		}
		if !extension.OwnsOperation(reg.Name, op.Name) {
			return fmt.Errorf("%w: registration %s: operation %q is outside its namespace %s.*; name it %s.<suffix>", extension.ErrInvalid, reg.Name, op.Name, reg.Name, reg.Name)
		}
		if seen[op.Name] {
			return fmt.Errorf("%w: registration %s: operation %s is listed twice", extension.ErrConflict, reg.Name, op.Name)
		}
		seen[op.Name] = true
		if err := checkOperation(op); err != nil {
			return fmt.Errorf("%w: registration %s: operation %s: %s", extension.ErrInvalid, reg.Name, op.Name, err.Error())
		}
	}
	for _, ts := range reg.Toolsets {
		if err := extension.CheckToolset(reg.Name, ts); err != nil {
			return fmt.Errorf("registration %s: %w", reg.Name, err)
		}
	}
	playbooks := map[string]bool{}
	for _, pb := range reg.Playbooks {
		if err := extension.CheckPlaybook(pb); err != nil {
			return fmt.Errorf("registration %s: %w", reg.Name, err)
		}
		if playbooks[pb.Name] {
			return fmt.Errorf("%w: registration %s: playbook %s is listed twice", extension.ErrConflict, reg.Name, pb.Name)
		}
		playbooks[pb.Name] = true
	}
	if reg.Ingress != nil {
		if src := reg.Ingress.Source(); !extension.OwnsOperation(reg.Name, src) || extension.OperationName(src) != nil {
			return fmt.Errorf("%w: registration %s: its ingress's source %q is outside its namespace %s.*; name it %s.<suffix>", extension.ErrInvalid, reg.Name, src, reg.Name, reg.Name)
		}
	}
	for _, act := range reg.Actions {
		if !extension.OwnsOperation(reg.Name, act.Name) {
			return fmt.Errorf("%w: registration %s: action %q is outside its namespace %s.*; name it %s.<suffix>", extension.ErrInvalid, reg.Name, act.Name, reg.Name, reg.Name)
		}
		if seen[act.Name] {
			return fmt.Errorf("%w: registration %s: the name %s is listed twice among its actions and operations", extension.ErrConflict, reg.Name, act.Name)
		}
		seen[act.Name] = true
		if err := checkAction(act); err != nil {
			return fmt.Errorf("%w: registration %s: action %s: %s", extension.ErrInvalid, reg.Name, act.Name, err.Error())
		}
	}
	return nil
}

func checkAction(act extension.Action) error {
	switch {
	case act.Summary == "":
		return errors.New("it has no summary; give one sentence saying what it does")
	case act.Handler == nil:
		return errors.New("it has no handler")
	}
	return checkInputSchema(act.InputSchema)
}

// Ingresses are the registrations with an ingress, in name order.
func (h *Host) Ingresses() []extension.Registration {
	h.mu.RLock()
	defer h.mu.RUnlock()
	var out []extension.Registration
	for _, r := range h.regs {
		if r.Ingress != nil {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// IngressConfig is what the active generation says of an ingress's
// registration: whether it is enabled (in some scope) and its config ({}
// when it has none).
func (h *Host) IngressConfig(reg string) (enabled bool, config json.RawMessage) {
	e := h.enablement(0, reg)
	return e.Enabled && (e.Scopes == nil || len(e.Scopes) > 0), h.configOf(reg)
}

// AdmitsTrace reports whether source is a registered ingress's source and,
// if so, whether a route trace in scope may name it: the active generation
// enables the registration for scope and its ingress admits it there.
func (h *Host) AdmitsTrace(source, scope string) (registered, admits bool) {
	for _, r := range h.Ingresses() {
		if r.Ingress.Source() == source {
			return true, h.enablement(0, r.Name).In(scope) && r.Ingress.AdmitsTrace(h.configOf(r.Name), scope)
		}
	}
	return false, false
}

// IngressSamples are the sample Events the ingresses offer for scope
// (extension.IngressSampler), each with its ingress's source, in
// registration-name order: only ingresses whose registration the active
// generation enables for scope and that admit a trace there are asked.
func (h *Host) IngressSamples(scope string) []IngressSample {
	var out []IngressSample
	for _, r := range h.Ingresses() {
		sm, ok := r.Ingress.(extension.IngressSampler)
		if !ok || !h.enablement(0, r.Name).In(scope) {
			continue
		}
		cfg := h.configOf(r.Name)
		if !r.Ingress.AdmitsTrace(cfg, scope) {
			continue
		}
		for _, s := range sm.Samples(cfg, scope) {
			out = append(out, IngressSample{Source: r.Ingress.Source(), IngressSample: s})
		}
	}
	return out
}

// IngressSample is a sample Event an ingress offers, with its source.
type IngressSample struct {
	Source string
	extension.IngressSample
}

// IngressEnabledIn reports whether the active generation enables the
// registration reg for scope.
func (h *Host) IngressEnabledIn(reg, scope string) bool { return h.enablement(0, reg).In(scope) }

// declared reports whether op is a registered extension operation.
func (h *Host) declared(op string) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	_, ok := h.ops[op]
	return ok
}

// declaredFor reports whether op is a registered extension operation whose
// registration serves scope for an attempt pinned to generation.
func (h *Host) declaredFor(generation int64, scope, op string) bool {
	r, ok := h.operation(op)
	return ok && h.enabledFor(generation, r.reg, scope)
}

// operationNames returns the registered extension operations, unsorted.
func (h *Host) operationNames() []string {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make([]string, 0, len(h.ops))
	for name := range h.ops {
		out = append(out, name)
	}
	return out
}

func (h *Host) operation(name string) (registered, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	r, ok := h.ops[name]
	return r, ok
}

// registeredFamily reports whether an event type's family (first segment)
// is a registration's namespace.
func (h *Host) registeredFamily(family string) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	_, ok := h.regs[family]
	return ok
}

// gates returns the registrations with a gate that the active generation
// enables for scope, in name order.
func (h *Host) gates(scope string) []extension.Registration {
	h.mu.RLock()
	var out []extension.Registration
	for _, r := range h.regs {
		if r.Gate != nil {
			out = append(out, r)
		}
	}
	h.mu.RUnlock()
	out = slices.DeleteFunc(out, func(r extension.Registration) bool { return !h.enablement(0, r.Name).In(scope) })
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// StartGates returns the registrations with a start gate that serve scope
// for a first attempt pinned to generation (both it and the active
// generation enable them there), in name order: the ones the scheduler
// asks before that attempt starts.
func (h *Host) StartGates(generation int64, scope string) []extension.Registration {
	h.mu.RLock()
	var out []extension.Registration
	for _, r := range h.regs {
		if r.StartGate != nil {
			out = append(out, r)
		}
	}
	h.mu.RUnlock()
	out = slices.DeleteFunc(out, func(r extension.Registration) bool { return !h.enabledFor(generation, r.Name, scope) })
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// actionList returns the registered actions, unsorted.
func (h *Host) actionList() []registeredAction {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make([]registeredAction, 0, len(h.actions))
	for _, r := range h.actions {
		out = append(out, r)
	}
	return out
}

func (h *Host) action(name string) (registeredAction, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	r, ok := h.actions[name]
	return r, ok
}
