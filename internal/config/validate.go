package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/executor"
)

// Validate strictly parses a version 1 configuration and checks its meaning
// against reg: defaults, ids, parents and cycles, tombstones, executors and
// their capabilities, references to bindings, secrets, scopes and
// extensions, and operation lists against their ceilings. It returns every
// diagnostic together, in a deterministic order, and for a valid
// configuration its Snapshot and warnings. The snapshot is nil when the
// result is not valid. A nil reg is a registry of the builtins alone.
func Validate(data []byte, reg *Registry) (*Snapshot, Result) {
	if reg == nil {
		reg = NewRegistry()
	}
	// One view of the registry throughout, however it changes meanwhile.
	reg = reg.snapshot()
	var is issues
	d := parseDocument(data, &is)
	if d.root == nil || d.stop {
		return nil, Result{Diagnostics: is.render(), Warnings: []Warning{}}
	}
	v := &validator{d: d, reg: reg, is: &is,
		status:     map[string]ancestry{},
		ceilings:   map[string]*authority{},
		reads:      map[string][]string{},
		readsClean: map[string]bool{},
		emit:       map[string]emitCeiling{},
		egress:     map[string]egressCeiling{},
		bindings:   map[[2]string]*EffectiveBinding{},
		playbooks:  reg.playbookSet(),
	}
	v.run()
	if len(is.list) > 0 {
		return nil, Result{Diagnostics: is.render(), Warnings: []Warning{}}
	}
	snap, err := v.snapshot()
	if err != nil {
		// A document that parsed cleanly always encodes; this is a bug.
		is.add(nil, CodeInvalidJSON, "the configuration could not be encoded again: report this as a bug")
		return nil, Result{Diagnostics: is.render(), Warnings: []Warning{}}
	}
	warnings := append(append(GrantWarnings(snap, reg), RouteWarnings(snap)...), IngressWarnings(snap)...)
	return snap, Result{Diagnostics: []Diagnostic{}, Warnings: append(warnings, v.extWarnings...)}
}

// ancestry is how a live scope's chain of parents ends.
type ancestry int

const (
	ancestryUnknown ancestry = iota // not computed yet
	ancestryVisiting
	ancestryOK     // reaches a root through live scopes
	ancestryBroken // an unknown, removed or malformed parent, or a cycle: already reported
)

type validator struct {
	d        *doc
	reg      *Registry
	is       *issues
	status   map[string]ancestry
	ceilings map[string]*authority
	reads    map[string][]string
	// readsClean: the scope's reads are known exactly (well-typed, each
	// inside its parent's), so its children's can be checked against them.
	readsClean map[string]bool
	emit       map[string]emitCeiling
	egress     map[string]egressCeiling
	bindings   map[[2]string]*EffectiveBinding
	// playbooks are the registry's playbooks as validation began.
	playbooks map[string][]string
	// extWarnings are the warnings of the extensions' own configs.
	extWarnings []Warning
}

// emitCeiling is a scope's emit rule: the event families its executions
// may emit when restricted; unrestricted, any family the toolbelt allows
// (neither core nor a registration's).
type emitCeiling struct {
	restricted bool
	families   []string
	// clean: the families are known exactly, so a child's can be checked
	// against them.
	clean bool
}

func (v *validator) add(path []step, code Code, remedy string) { v.is.add(path, code, remedy) }

func scopePath(id string, rest ...step) []step {
	return append([]step{keyStep("scopes"), keyStep(id)}, rest...)
}

func (v *validator) run() {
	v.checkExtensions()
	ids := sortedKeys(v.d.scopes)
	for _, id := range ids {
		v.ancestry(id)
	}
	for _, id := range ids {
		sc := v.d.scopes[id]
		if sc.broken || sc.removed {
			continue
		}
		v.ceiling(id)
		v.checkBindings(sc)
		v.checkRoutes(sc)
	}
}

func (v *validator) checkExtensions() {
	for _, name := range sortedKeys(v.d.extensions) {
		e := v.d.extensions[name]
		base := []step{keyStep("extensions"), keyStep(name)}
		if !v.reg.extensions[name] {
			v.add(base, CodeUnknownReference, "this release registers no extension of this name: correct it, or install the extension")
		} else {
			v.checkExtensionConfig(name, e, base)
		}
		if !v.d.scopesOK {
			continue
		}
		for _, it := range e.scopes {
			if _, ok := v.d.scopes[it.s]; !ok {
				v.add(append(base, keyStep("scopes"), idxStep(it.idx)), CodeUnknownReference, "no scope has this id: name a scope of this configuration")
			}
		}
	}
}

// checkExtensionConfig runs a registered extension's own check on its
// entry's config ({} when the entry has none), placing each problem inside
// /extensions/<name>/config.
func (v *validator) checkExtensionConfig(name string, e *docExtension, base []step) {
	configPath := append(slices.Clone(base), keyStep("config"))
	check := v.reg.extConfig[name]
	if check == nil {
		if e.config != nil {
			v.add(configPath, CodeUnknownField, "this extension takes no config: remove the member")
		}
		return
	}
	raw := json.RawMessage("{}")
	if e.config != nil {
		if hasBad(e.config) {
			return // already reported inside
		}
		c, err := e.config.canonical(nil)
		if err != nil {
			return
		}
		raw = c
	}
	err := check(raw)
	if err == nil {
		v.inspectExtensionConfig(name, e, raw, configPath)
		return
	}
	var ce *extension.ConfigError
	if !errors.As(err, &ce) || len(ce.Problems) == 0 {
		v.add(configPath, CodeInvalidValue, "the extension refused this config: check it against the extension's documented fields")
		return
	}
	for _, p := range ce.Problems {
		code, remedy := Code(p.Code), p.Remedy
		if !knownCodes[code] {
			code = CodeInvalidValue
		}
		if remedy == "" {
			remedy = "the extension refused this member: check it against the extension's documented fields"
		}
		v.add(append(slices.Clone(configPath), pointerSteps(p.Pointer, e.config)...), code, remedy)
	}
}

// inspectExtensionConfig checks what an accepted extension config refers
// to against the configuration (its secrets, its scopes) and keeps its
// warnings. No message quotes a configured value: the pointer says which.
func (v *validator) inspectExtensionConfig(name string, e *docExtension, raw json.RawMessage, configPath []step) {
	inspect := v.reg.extInspect[name]
	if inspect == nil {
		return
	}
	rep := inspect(raw)
	at := func(ptr string) []step {
		return append(slices.Clone(configPath), pointerSteps(ptr, e.config)...)
	}
	for _, ref := range rep.Secrets {
		if _, ok := v.d.secrets[ref.Name]; !ok && v.d.secretsOK {
			v.add(at(ref.Pointer), CodeUnknownReference, "no secret has this name: name a key of the top-level secrets, or add it there")
		}
	}
	for _, ref := range rep.Scopes {
		sc, ok := v.d.scopes[ref.Name]
		if v.d.scopesOK && (!ok || sc.removed) {
			v.add(at(ref.Pointer), CodeUnknownReference, "no scope has this id: name a live scope of this configuration")
		}
	}
	for _, w := range rep.Warnings {
		v.extWarnings = append(v.extWarnings, Warning{Pointer: pointer(at(w.Pointer)), Code: w.Code, Message: w.Remedy})
	}
}

// ancestry works out, once per scope, whether its chain of parents reaches
// a root through live scopes, and reports unknown and removed parents and
// cycles.
func (v *validator) ancestry(id string) ancestry {
	sc := v.d.scopes[id]
	switch st := v.status[id]; st {
	case ancestryVisiting:
		return ancestryVisiting
	case ancestryOK, ancestryBroken:
		return st
	}
	if sc.broken || sc.removed {
		// A tombstone's parent is kept but never used.
		v.status[id] = ancestryBroken
		return ancestryBroken
	}
	if !sc.parentSet {
		v.status[id] = ancestryOK
		return ancestryOK
	}
	parentPath := scopePath(id, keyStep("parent"))
	if !sc.parentOK {
		v.status[id] = ancestryBroken
		return ancestryBroken
	}
	p, ok := v.d.scopes[sc.parent]
	switch {
	case !ok:
		if v.d.scopesOK {
			v.add(parentPath, CodeUnknownReference, "no scope has this id: name a scope of this configuration, or leave parent out for a root scope")
		}
		v.status[id] = ancestryBroken
		return ancestryBroken
	case p.broken:
		v.status[id] = ancestryBroken
		return ancestryBroken
	case p.removed:
		v.add(parentPath, CodeInvalidValue, "the parent is a removed scope, which can't be the parent of a live scope: choose another parent, or remove this scope too")
		v.status[id] = ancestryBroken
		return ancestryBroken
	}
	v.status[id] = ancestryVisiting
	switch v.ancestry(sc.parent) {
	case ancestryOK:
		v.status[id] = ancestryOK
	case ancestryVisiting:
		// id closes a cycle: report every scope on it.
		for c := sc.parent; ; c = v.d.scopes[c].parent {
			v.add(scopePath(c, keyStep("parent")), CodeCycle, "the chain of parents comes back to this scope: make one scope of the cycle a root, or give it a parent outside the cycle")
			v.status[c] = ancestryBroken
			if c == id {
				break
			}
		}
	default:
		v.status[id] = ancestryBroken
	}
	if v.status[id] == ancestryVisiting {
		v.status[id] = ancestryBroken
	}
	return v.status[id]
}

// ceiling resolves a live scope's authorization inside its parent's and
// reports what its lists get wrong. A scope whose ancestry is broken is
// checked against the registry only, since its ceiling is unknown.
func (v *validator) ceiling(id string) *authority {
	if a, ok := v.ceilings[id]; ok {
		return a
	}
	sc := v.d.scopes[id]
	parent, parentReads, readsKnown := unlimited, []string(nil), false
	if sc.parentSet && v.status[id] == ancestryOK {
		parent = v.ceiling(sc.parent)
		parentReads = v.reads[sc.parent]
		readsKnown = v.readsClean[sc.parent]
	}
	base := scopePath(id, keyStep("authorization"))
	a, clean := v.narrow(sc.ops, parent, append(base, keyStep("operations")))
	if !clean || !sc.authOK {
		// What the list meant is unknown, so the lists inside it are
		// checked against the registry only: no second report of the
		// same mistake.
		a = unlimited
	}
	v.ceilings[id] = a
	var reads []string
	v.readsClean[id] = sc.authOK
	for _, it := range sc.reads {
		if readsKnown && !slices.Contains(parentReads, it.s) {
			v.add(append(base, keyStep("reads"), idxStep(it.idx)), CodeAuthorityWidening, "the parent scope does not authorize this read: remove it here, or add it to the parent's authorization.reads first")
			v.readsClean[id] = false
			continue
		}
		if !slices.Contains(reads, it.s) {
			reads = append(reads, it.s)
		}
	}
	v.reads[id] = reads
	v.emit[id] = v.emitOf(sc, base)
	v.egress[id] = v.egressOf(sc, base)
	return a
}

// emitOf resolves a scope's authorization.emit inside its parent's rule
// (ceiling computed the parent's first): absent, it is the parent's (a
// root's allows any family); present, it lists the families, each one
// the parent allows and none a registration's.
func (v *validator) emitOf(sc *docScope, base []step) emitCeiling {
	parent, known := emitCeiling{clean: true}, true
	if sc.parentSet {
		parent, known = v.emit[sc.parent], v.status[sc.id] == ancestryOK
	}
	if !sc.emitSet {
		if !known {
			return emitCeiling{}
		}
		return parent
	}
	e := emitCeiling{restricted: true, families: []string{}, clean: sc.authOK && known}
	for _, it := range sc.emit {
		path := append(slices.Clone(base), keyStep("emit"), idxStep(it.idx))
		if v.reg.extensions[it.s] {
			// No ceiling includes a registration's family: an execution
			// never emits it itself.
			v.add(path, CodeAuthorityWidening, "this family belongs to the extension of the same name: its events are emitted only through its operations, which the scope grants instead; remove it here")
			e.clean = false
			continue
		}
		if known && parent.restricted && parent.clean && !slices.Contains(parent.families, it.s) {
			v.add(path, CodeAuthorityWidening, "the parent scope does not allow this family: remove it here, or add it to the parent's authorization.emit first")
			e.clean = false
			continue
		}
		if !slices.Contains(e.families, it.s) {
			e.families = append(e.families, it.s)
		}
	}
	return e
}

// narrow resolves a list inside within, reporting its problems at path. It
// reports whether the list had none.
func (v *validator) narrow(items []item, within *authority, path []step) (*authority, bool) {
	a, problems := within.narrow(itemStrings(items), v.reg)
	for _, p := range problems {
		v.add(append(slices.Clone(path), idxStep(items[p.idx].idx)), p.code, p.remedy)
	}
	return a, len(problems) == 0
}

func (v *validator) checkBindings(sc *docScope) {
	ceiling := v.ceilings[sc.id]
	for _, bid := range sortedKeys(sc.bindings) {
		b := sc.bindings[bid]
		if b.broken {
			continue
		}
		base := scopePath(sc.id, keyStep("bindings"), keyStep(bid))
		eb := &EffectiveBinding{ID: bid, Executor: b.executor,
			Secrets: map[string]string{}, Grants: map[string][]string{}}
		var namer extension.PlaybookNamer
		configOK := false
		if b.executor != "" {
			info, ok := v.reg.executors[b.executor]
			if !ok {
				v.add(append(base, keyStep("executor")), CodeUnknownReference, "this release registers no executor of this name: name a registered executor such as shell")
			} else {
				configOK = v.checkExecutor(info, b, base)
				namer = info.namer
			}
		}
		eb.Playbook, eb.PlaybookOperations = v.bindingPlaybook(b, namer, configOK, base)
		ops, _ := v.narrow(b.ops, ceiling, append(base, keyStep("operations")))
		eb.Operations = orEmpty(ops.ops)
		for _, gid := range sortedKeys(b.grants) {
			g := b.grants[gid]
			gops, _ := v.narrow(g.ops, ceiling, append(base, keyStep("grants"), keyStep(gid), keyStep("operations")))
			eb.Grants[gid] = orEmpty(gops.ops)
		}
		for _, sel := range b.secrets {
			if _, ok := v.d.secrets[sel.secret]; !ok && v.d.secretsOK {
				v.add(append(base, keyStep("secrets"), keyStep(sel.env)), CodeUnknownReference, "no secret has this name: add it to the top-level secrets, or name one that is there")
				continue
			}
			eb.Secrets[sel.env] = sel.secret
		}
		eb.Egress = v.bindingEgress(sc, b, base)
		v.bindings[[2]string{sc.id, bid}] = eb
	}
}

// checkExecutor checks a binding against its executor and reports
// whether its config passed the executor's own check.
func (v *validator) checkExecutor(e registeredExecutor, b *docBinding, base []step) bool {
	for _, it := range b.requires {
		if !e.info.Has(executor.Capability(it.s)) {
			v.add(append(slices.Clone(base), keyStep("requires"), idxStep(it.idx)), CodeInvalidCapability,
				"the binding's executor does not have this capability: choose an executor that has it, or remove it from requires")
		}
	}
	raw, ok := bindingConfig(b)
	if !ok {
		return false
	}
	if e.check == nil {
		return true
	}
	err := e.check(raw)
	if err == nil {
		return true
	}
	configPath := append(slices.Clone(base), keyStep("config"))
	var ce *ExecutorConfigError
	if !errors.As(err, &ce) || len(ce.Problems) == 0 {
		v.add(configPath, CodeInvalidValue, "the executor refused this config: check it against the executor's documented fields")
		return false
	}
	for _, p := range ce.Problems {
		code, remedy := p.Code, p.Remedy
		if !knownCodes[code] {
			code = CodeInvalidValue
		}
		if remedy == "" {
			remedy = "the executor refused this member: check it against the executor's documented fields"
		}
		v.add(append(slices.Clone(configPath), pointerSteps(p.Pointer, b.config)...), code, remedy)
	}
	return false
}

// bindingConfig is a binding's executor config as the executor is given
// it ({} when it has none), unless it is broken (reported already).
func bindingConfig(b *docBinding) (json.RawMessage, bool) {
	if b.config == nil {
		return json.RawMessage("{}"), true
	}
	if hasBad(b.config) {
		return nil, false
	}
	c, err := b.config.canonical(nil)
	if err != nil {
		return nil, false
	}
	return c, true
}

// bindingPlaybook is the playbook a binding's turns start on and the
// operations it declares: the one its executor names from its config
// (asked once, and only when the config passed the executor's check),
// else the binding's playbook member. A member naming another playbook
// than the executor does is invalid_value; a playbook the registry does
// not hold is unknown_reference.
func (v *validator) bindingPlaybook(b *docBinding, namer extension.PlaybookNamer, configOK bool, base []step) (string, []string) {
	name, path := b.playbook, append(slices.Clone(base), keyStep("playbook"))
	if namer != nil && configOK {
		if named := namer.PlaybookName(mustConfig(b)); named != "" {
			if b.playbook != "" && b.playbook != named {
				v.add(path, CodeInvalidValue, "the binding's executor config starts its turns on another playbook: remove this member, or name the playbook the config names")
				return "", nil
			}
			name, path = named, append(slices.Clone(base), keyStep("config"))
			if b.playbook != "" {
				path = append(slices.Clone(base), keyStep("playbook"))
			}
		}
	}
	if name == "" {
		return "", nil
	}
	ops, ok := v.playbooks[name]
	if !ok {
		v.add(path, CodeUnknownReference, "no playbook has this name: name one an extension ships or the operator added as playbooks/<name>.md beside the configuration file")
		return "", nil
	}
	return name, slices.Clone(ops)
}

func mustConfig(b *docBinding) json.RawMessage {
	raw, _ := bindingConfig(b)
	return raw
}

// knownCodes are the codes an executor's problems may carry as they are.
var knownCodes = map[Code]bool{
	CodeInvalidJSON: true, CodeDuplicateKey: true, CodeUnknownField: true, CodeNullValue: true,
	CodeWrongType: true, CodeMissingField: true, CodeInvalidValue: true,
}

// pointerSteps parses a pointer relative to a config node into steps,
// telling array indexes from member names by the node's shape. A pointer
// that does not parse becomes no steps: the config itself.
func pointerSteps(ptr string, n *node) []step {
	if ptr == "" || ptr[0] != '/' {
		return nil
	}
	var out []step
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = unescapeToken.Replace(tok)
		if n != nil && n.kind == kindArray {
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || strconv.Itoa(i) != tok {
				return out
			}
			out = append(out, idxStep(i))
			if i < len(n.elems) {
				n = n.elems[i]
			} else {
				n = nil
			}
			continue
		}
		out = append(out, keyStep(tok))
		if n != nil {
			n = lookup(n, tok)
		}
	}
	return out
}

// hasBad reports whether any value under n was already reported.
func hasBad(n *node) bool {
	if n.bad {
		return true
	}
	for _, m := range n.members {
		if hasBad(m.value) {
			return true
		}
	}
	for _, e := range n.elems {
		if hasBad(e) {
			return true
		}
	}
	return false
}

func (v *validator) checkRoutes(sc *docScope) {
	seen, samples := map[string]bool{}, map[string]bool{}
	for _, r := range sc.routes {
		base := scopePath(sc.id, keyStep("routes"), idxStep(r.idx))
		for _, sm := range r.samples {
			if samples[sm.name] {
				v.add(append(slices.Clone(base), keyStep("samples"), keyStep(sm.name)), CodeInvalidValue, "another route of this scope has a sample of this name: sample names are unique within a scope")
			}
			samples[sm.name] = true
		}
		if r.id != "" {
			if seen[r.id] {
				v.add(append(slices.Clone(base), keyStep("id")), CodeInvalidValue, "another route of this scope has this id: route ids are unique within a scope")
			}
			seen[r.id] = true
		}
		if r.bindingSet && sc.bindingsOK {
			if _, ok := sc.bindings[r.binding]; !ok {
				v.add(append(slices.Clone(base), keyStep("binding")), CodeUnknownReference, "this scope has no binding of this name: name one of the scope's own bindings")
			}
		}
	}
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// redactSecrets stands in for each secret reference in the normalized form.
func (d *doc) redactSecrets(n *node) (string, bool) {
	p := n.parent
	if n.kind != kindString || p == nil || p.parent != d.root || p.at.key != "secrets" {
		return "", false
	}
	if IsRedactedReference(n.text) {
		// Already the redacted form (a document read back from config get).
		return n.text, true
	}
	ref, err := ParseSecretRef(n.text)
	if err != nil {
		return redactedMark, true
	}
	return ref.String(), true
}

func (v *validator) snapshot() (*Snapshot, error) {
	canon, err := v.d.root.canonical(nil)
	if err != nil {
		return nil, err
	}
	normalized, err := v.d.root.canonical(v.d.redactSecrets)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(canon)
	s := &Snapshot{
		Hash:       hex.EncodeToString(sum[:]),
		Normalized: json.RawMessage(normalized),
		config:     v.d.config(),
		scopes:     map[string]*EffectiveScope{},
		unlisted:   map[string]bool{},
	}
	for name := range v.reg.extensions {
		if !v.reg.optIn[name] {
			s.unlisted[name] = true
		}
	}
	ids := sortedKeys(v.d.scopes)
	for _, id := range ids {
		sc := v.d.scopes[id]
		es := &EffectiveScope{ID: id, Parent: sc.parent, Enabled: sc.enabled, Removed: sc.removed,
			Operations: []string{}, Reads: []string{}}
		if !sc.removed {
			es.Operations = orEmpty(slices.Clone(v.ceilings[id].ops))
			es.Reads = orEmpty(slices.Clone(v.reads[id]))
			if e := v.emit[id]; e.restricted {
				es.EmitRestricted, es.Emit = true, slices.Sorted(slices.Values(e.families))
			}
			if e := v.egress[id]; e.restricted {
				es.EgressRestricted, es.Egress = true, slices.Clone(e.entries)
			}
			es.Bindings = map[string]*EffectiveBinding{}
			for bid, written := range s.config.Scopes[id].Bindings {
				eb := v.bindings[[2]string{id, bid}]
				eb.Config, eb.Requires = written.Config, written.Requires
				es.Bindings[bid] = eb
			}
			es.Routes = slices.Clone(s.config.Scopes[id].Routes)
		}
		s.scopes[id] = es
		s.order = append(s.order, id)
	}
	// Active: enabled and not removed, with every ancestor active. Parents
	// of live scopes are live and acyclic in a valid configuration.
	var active func(id string) bool
	memo := map[string]bool{}
	active = func(id string) bool {
		if a, ok := memo[id]; ok {
			return a
		}
		es := s.scopes[id]
		a := es.Enabled && !es.Removed && (es.Parent == "" || active(es.Parent))
		memo[id] = a
		return a
	}
	for _, id := range ids {
		s.scopes[id].Active = active(id)
	}
	return s, nil
}
