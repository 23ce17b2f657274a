package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/executor"
)

// ConfigCheck checks an executor's binding config. When its error is (or
// wraps) an *ExecutorConfigError, each problem becomes a diagnostic at its
// place inside the config. Any other error's text is never shown: it
// becomes one invalid_value diagnostic at the config member with a generic
// remedy, since the text could quote a configured value.
type ConfigCheck func(config json.RawMessage) error

// ExecutorConfigError lists the problems an executor found in a binding's
// config. Each Pointer is relative to the config ("" for the config
// itself); Code is one of the diagnostic codes (others are reported as
// invalid_value); Remedy must not quote a configured value. Validation
// still cuts each pointer at the first member name that is not safe to
// show.
type ExecutorConfigError struct {
	Problems []Diagnostic
}

func (e *ExecutorConfigError) Error() string {
	return fmt.Sprintf("executor config: %d problems", len(e.Problems))
}

// Registry is what the running release registers, against which a
// configuration is validated: executors and their capabilities, operations
// and the registration owning each, toolsets, extensions and playbooks.
// It is safe for concurrent use: an installed package adds and removes
// its extension and executors while the daemon runs, and each validation
// works on a copy taken when it starts, so it sees one registry
// throughout.
//
// SetOperatorPlaybooks may replace the operator's playbooks at any time,
// and each validation reads them once.
type Registry struct {
	mu         sync.RWMutex // guards everything but the operator's playbooks
	executors  map[string]registeredExecutor
	operations map[string]string // operation -> owning registration, "" for a builtin
	toolsets   map[string]extension.Toolset
	extensions map[string]bool
	playbooks  map[string]registeredPlaybook // the release's and its extensions'
	// extConfig checks an extension's own config (extensions.<name>.config).
	extConfig map[string]ConfigCheck
	// extInspect reports what an accepted extension config refers to and
	// its warnings.
	extInspect map[string]func(json.RawMessage) extension.ConfigReport
	// optIn holds the extensions enabled only where an entry enables them.
	optIn map[string]bool

	operatorMu sync.RWMutex
	operator   map[string]registeredPlaybook // the operator's own
}

type registeredExecutor struct {
	info  executor.Info
	check ConfigCheck
	namer extension.PlaybookNamer
}

type registeredPlaybook struct {
	operations []string
	markdown   string
}

// NewRegistry returns a registry holding the builtin operations
// (extension.Builtins) and nothing else.
func NewRegistry() *Registry {
	r := &Registry{
		executors:  map[string]registeredExecutor{},
		operations: map[string]string{},
		toolsets:   map[string]extension.Toolset{},
		extensions: map[string]bool{},
		playbooks:  map[string]registeredPlaybook{},
		extConfig:  map[string]ConfigCheck{},
		extInspect: map[string]func(json.RawMessage) extension.ConfigReport{},
		optIn:      map[string]bool{},
		operator:   map[string]registeredPlaybook{},
	}
	for _, op := range extension.Builtins {
		r.operations[op] = ""
	}
	return r
}

// DefaultRegistry returns a registry holding the builtin operations and the
// given executors. It panics on an empty or repeated executor name, which
// is a mistake in the program, not in a configuration.
func DefaultRegistry(executors ...executor.Info) *Registry {
	r := NewRegistry()
	for _, info := range executors {
		if err := r.AddExecutor(info, nil); err != nil {
			panic(err)
		}
	}
	return r
}

// AddExecutor registers an executor. check, when not nil, checks a
// binding's executor config.
func (r *Registry) AddExecutor(info executor.Info, check ConfigCheck) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if info.Name == "" {
		return fmt.Errorf("%w: executor name is empty", extension.ErrInvalid)
	}
	if _, dup := r.executors[info.Name]; dup {
		return fmt.Errorf("%w: executor %s is already registered", extension.ErrConflict, info.Name)
	}
	info.Capabilities = slices.Clone(info.Capabilities)
	r.executors[info.Name] = registeredExecutor{info: info, check: check}
	return nil
}

// AddExtension registers an extension by its registration name, with the
// operations it owns and the toolsets it publishes, when CheckExtension
// accepts them. A refused extension registers nothing.
func (r *Registry) AddExtension(name string, operations []string, toolsets []extension.Toolset) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.checkExtension(name, operations, toolsets); err != nil {
		return err
	}
	r.extensions[name] = true
	for _, op := range operations {
		r.operations[op] = name
	}
	for _, ts := range toolsets {
		ts.Operations = slices.Clone(ts.Operations)
		r.toolsets[ts.Name] = ts
	}
	return nil
}

// CheckExtension reports whether AddExtension would accept an extension,
// changing nothing: its name is a registration name not registered yet;
// each operation is in its namespace and not registered yet; each toolset
// passes extension.CheckToolset and is not registered yet.
func (r *Registry) CheckExtension(name string, operations []string, toolsets []extension.Toolset) error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.checkExtension(name, operations, toolsets)
}

func (r *Registry) checkExtension(name string, operations []string, toolsets []extension.Toolset) error {
	if err := extension.RegistrationName(name); err != nil {
		return err
	}
	if r.extensions[name] {
		return fmt.Errorf("%w: extension %s is already registered", extension.ErrConflict, name)
	}
	seen := map[string]bool{}
	for _, op := range operations {
		if !extension.OwnsOperation(name, op) {
			return fmt.Errorf("%w: operation %s is outside the namespace of %s", extension.ErrInvalid, op, name)
		}
		if _, taken := r.operations[op]; taken || seen[op] {
			return fmt.Errorf("%w: operation %s is already registered", extension.ErrConflict, op)
		}
		seen[op] = true
	}
	tsSeen := map[string]bool{}
	for _, ts := range toolsets {
		if err := extension.CheckToolset(name, ts); err != nil {
			return err
		}
		if _, taken := r.toolsets[ts.Name]; taken || tsSeen[ts.Name] {
			return fmt.Errorf("%w: toolset %s is already registered", extension.ErrConflict, ts.Name)
		}
		tsSeen[ts.Name] = true
	}
	return nil
}

// SetExtensionConfig gives a registered extension the check of its own
// configuration (extensions.<name>.config), which validation runs on every
// entry of that extension. An entry with a config whose extension has no
// check is refused (unknown_field): the extension takes none.
func (r *Registry) SetExtensionConfig(name string, check func(config json.RawMessage) error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.extensions[name] {
		return fmt.Errorf("%w: extension %s is not registered", extension.ErrNotFound, name)
	}
	if check == nil {
		return fmt.Errorf("%w: extension %s: the config check is nil", extension.ErrInvalid, name)
	}
	r.extConfig[name] = check
	return nil
}

// SetExtensionInspect gives a registered extension the report of what its
// accepted config refers to outside itself (secret names, scope ids) and
// its warnings: validation reports a name the configuration lacks as
// unknown_reference at its place, and adds the warnings to its result.
func (r *Registry) SetExtensionInspect(name string, inspect func(config json.RawMessage) extension.ConfigReport) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.extensions[name] {
		return fmt.Errorf("%w: extension %s is not registered", extension.ErrNotFound, name)
	}
	if inspect == nil {
		return fmt.Errorf("%w: extension %s: the config inspection is nil", extension.ErrInvalid, name)
	}
	r.extInspect[name] = inspect
	return nil
}

// SetExtensionOptIn makes a registered extension opt-in: a configuration
// with no entry for it does not enable it (Snapshot.ExtensionEnabled).
func (r *Registry) SetExtensionOptIn(name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.extensions[name] {
		return fmt.Errorf("%w: extension %s is not registered", extension.ErrNotFound, name)
	}
	r.optIn[name] = true
	return nil
}

// SetPlaybookNamer says that a registered executor names the playbook a
// binding config starts its turns on; validation asks it once per binding
// whose config passed the executor's check.
func (r *Registry) SetPlaybookNamer(executorName string, n extension.PlaybookNamer) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.executors[executorName]
	if !ok {
		return fmt.Errorf("%w: executor %s is not registered", extension.ErrNotFound, executorName)
	}
	e.namer = n
	r.executors[executorName] = e
	return nil
}

// AddPlaybook records the operations a playbook declares it uses, for
// validation and the grant warnings, without its Markdown. A name already
// registered is ErrConflict.
func (r *Registry) AddPlaybook(name string, operations []string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !validPlaybookName(name) {
		return fmt.Errorf("%w: playbook name %s is not a valid name", extension.ErrInvalid, name)
	}
	if _, dup := r.playbooks[name]; dup {
		return fmt.Errorf("%w: playbook %s is already registered", extension.ErrConflict, name)
	}
	r.playbooks[name] = registeredPlaybook{operations: slices.Clone(operations)}
	return nil
}

// CheckPlaybooks reports whether AddPlaybooks would accept an extension's
// playbooks, changing nothing: each passes extension.CheckPlaybook and
// its name is neither registered yet nor repeated.
func (r *Registry) CheckPlaybooks(pbs []extension.Playbook) error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.checkPlaybooks(pbs)
}

func (r *Registry) checkPlaybooks(pbs []extension.Playbook) error {
	seen := map[string]bool{}
	for _, p := range pbs {
		if err := extension.CheckPlaybook(p); err != nil {
			return err
		}
		if _, dup := r.playbooks[p.Name]; dup || seen[p.Name] {
			return fmt.Errorf("%w: playbook %s is already registered", extension.ErrConflict, p.Name)
		}
		seen[p.Name] = true
	}
	return nil
}

// AddPlaybooks registers an extension's playbooks when CheckPlaybooks
// accepts them; a refusal registers none.
func (r *Registry) AddPlaybooks(pbs []extension.Playbook) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.checkPlaybooks(pbs); err != nil {
		return err
	}
	for _, p := range pbs {
		ops, _ := extension.PlaybookOperations(p.Markdown)
		r.playbooks[p.Name] = registeredPlaybook{operations: ops, markdown: p.Markdown}
	}
	return nil
}

// SetOperatorPlaybooks replaces the operator's own playbooks (those of
// <state>/playbooks/). A playbook that fails extension.CheckPlaybook, or
// whose name the release or an extension registered (theirs wins) or an
// earlier one of pbs took, is left out, with an error saying why. It is
// safe to call while configurations are validated.
func (r *Registry) SetOperatorPlaybooks(pbs []extension.Playbook) []error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var problems []error
	next := map[string]registeredPlaybook{}
	for _, p := range pbs {
		if err := extension.CheckPlaybook(p); err != nil {
			problems = append(problems, err)
			continue
		}
		if _, dup := r.playbooks[p.Name]; dup {
			problems = append(problems, fmt.Errorf("%w: playbook %s is one an extension ships; give the operator's another name", extension.ErrConflict, p.Name))
			continue
		}
		if _, dup := next[p.Name]; dup {
			problems = append(problems, fmt.Errorf("%w: playbook %s is given twice", extension.ErrConflict, p.Name))
			continue
		}
		ops, _ := extension.PlaybookOperations(p.Markdown)
		next[p.Name] = registeredPlaybook{operations: ops, markdown: p.Markdown}
	}
	r.operatorMu.Lock()
	r.operator = next
	r.operatorMu.Unlock()
	return problems
}

// Playbooks returns every playbook whose Markdown the registry holds (the
// extensions' and the operator's), sorted by name.
func (r *Registry) Playbooks() []extension.Playbook {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []extension.Playbook
	for name, p := range r.playbooks {
		if p.markdown != "" {
			out = append(out, extension.Playbook{Name: name, Markdown: p.markdown})
		}
	}
	r.operatorMu.RLock()
	for name, p := range r.operator {
		out = append(out, extension.Playbook{Name: name, Markdown: p.markdown})
	}
	r.operatorMu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// playbookSet returns every playbook's operations by name.
func (r *Registry) playbookSet() map[string][]string {
	out := make(map[string][]string, len(r.playbooks))
	for name, p := range r.playbooks {
		out[name] = p.operations
	}
	r.operatorMu.RLock()
	for name, p := range r.operator {
		out[name] = p.operations
	}
	r.operatorMu.RUnlock()
	return out
}

// Executor returns a registered executor's description.
func (r *Registry) Executor(name string) (executor.Info, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.executors[name]
	return e.info, ok
}

// OperationOwner returns the registration that owns op ("" for a builtin)
// and whether op is registered.
func (r *Registry) OperationOwner(op string) (string, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	owner, ok := r.operations[op]
	return owner, ok
}

// Operations returns every registered operation, sorted.
func (r *Registry) Operations() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return sortedKeys(r.operations)
}

// Toolset returns a registered toolset.
func (r *Registry) Toolset(name string) (extension.Toolset, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	ts, ok := r.toolsets[name]
	return ts, ok
}

// Toolsets returns every registered toolset, sorted by name.
func (r *Registry) Toolsets() []extension.Toolset {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]extension.Toolset, 0, len(r.toolsets))
	for _, name := range sortedKeys(r.toolsets) {
		out = append(out, r.toolsets[name])
	}
	return out
}

// Extensions returns the registered extension names, sorted.
func (r *Registry) Extensions() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return sortedKeys(r.extensions)
}

// PlaybookOperations returns the operations a registered playbook declares.
func (r *Registry) PlaybookOperations(name string) ([]string, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	ops, ok := r.playbookSet()[name]
	return slices.Clone(ops), ok
}

// toolsetOperations returns the registered members of a toolset, in order.
func (r *Registry) toolsetOperations(name string) []string {
	var out []string
	for _, op := range r.toolsets[name].Operations {
		if _, ok := r.operations[op.Name]; ok {
			out = append(out, op.Name)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// RemoveExtension removes a registered extension and everything it
// registered with it: its operations (undeclared again: a configuration
// granting one no longer validates), its toolsets, its config check and
// inspection and its opt-in. Its playbooks are removed by RemovePlaybooks.
// An installed package's removal calls it while the daemon runs.
func (r *Registry) RemoveExtension(name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.extensions[name] {
		return fmt.Errorf("%w: extension %s is not registered", extension.ErrNotFound, name)
	}
	delete(r.extensions, name)
	for op, owner := range r.operations {
		if owner == name {
			delete(r.operations, op)
		}
	}
	for ts := range r.toolsets {
		if extension.OwnsOperation(name, ts) {
			delete(r.toolsets, ts)
		}
	}
	delete(r.extConfig, name)
	delete(r.extInspect, name)
	delete(r.optIn, name)
	return nil
}

// RemovePlaybooks removes the named playbooks an extension registered
// (AddPlaybooks); a name not registered is skipped.
func (r *Registry) RemovePlaybooks(names []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range names {
		delete(r.playbooks, n)
	}
}

// RemoveExecutor removes a registered executor (an installed package's,
// on its removal).
func (r *Registry) RemoveExecutor(name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.executors[name]; !ok {
		return fmt.Errorf("%w: executor %s is not registered", extension.ErrNotFound, name)
	}
	delete(r.executors, name)
	return nil
}

// snapshot is a copy of the registry a validation works on: later changes
// do not reach it, and reading it takes no lock.
func (r *Registry) snapshot() *Registry {
	r.mu.RLock()
	defer r.mu.RUnlock()
	c := &Registry{
		executors:  maps.Clone(r.executors),
		operations: maps.Clone(r.operations),
		toolsets:   maps.Clone(r.toolsets),
		extensions: maps.Clone(r.extensions),
		playbooks:  maps.Clone(r.playbooks),
		extConfig:  maps.Clone(r.extConfig),
		extInspect: maps.Clone(r.extInspect),
		optIn:      maps.Clone(r.optIn),
	}
	r.operatorMu.RLock()
	c.operator = maps.Clone(r.operator)
	r.operatorMu.RUnlock()
	return c
}

// Without returns a copy of the registry without the extension name (its
// operations, toolsets, checks and opt-in), the playbooks and the
// executors given: what a configuration would be validated against once
// they are removed. It changes nothing of r.
func (r *Registry) Without(name string, playbooks, executors []string) *Registry {
	c := r.snapshot()
	_ = c.RemoveExtension(name)
	c.RemovePlaybooks(playbooks)
	for _, e := range executors {
		_ = c.RemoveExecutor(e)
	}
	return c
}
