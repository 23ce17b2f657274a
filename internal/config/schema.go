package config

import (
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/executor"
)

// The schema step reads the node tree into the document model below,
// reporting wrong types, unknown and missing fields and values of the wrong
// shape. A member that is wrong is left at its zero value and marked, so
// that the meaning checks after it skip it instead of reporting it twice.

// item is a string element of a list and its index in the array.
type item struct {
	idx int
	s   string
}

func itemStrings(items []item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.s
	}
	return out
}

type doc struct {
	root       *node
	stop       bool // the version is one this release cannot read
	version    int64
	limits     Limits
	ingress    Ingress
	secrets    map[string]*docSecret
	secretsOK  bool // absent or an object: references into it can be checked
	extensions map[string]*docExtension
	scopes     map[string]*docScope
	scopesOK   bool
}

type docSecret struct {
	ref SecretRef // zero when the reference is wrong (already reported)
}

type docExtension struct {
	enabled   bool
	scopes    []item
	scopesSet bool
	config    *node // the extension's own config, an object; nil when absent
}

type docScope struct {
	id         string
	broken     bool // not an object
	parent     string
	parentSet  bool // a parent member is present
	parentOK   bool // and a well-formed id
	enabled    bool
	removed    bool
	ops        []item
	reads      []item
	emit       []item
	emitSet    bool // an authorization.emit member is present
	egress     []egressItem
	egressSet  bool // an authorization.egress member is present
	egressOK   bool // and every element of it is an entry
	authOK     bool // authorization and its lists are well-typed, if present
	bindings   map[string]*docBinding
	bindingsOK bool
	routes     []*docRoute
}

type docBinding struct {
	id       string
	broken   bool
	executor string
	config   *node
	ops      []item
	secrets  []envSelection
	grants   map[string]*docGrant
	requires []item
	playbook string
	egress   []egressItem
}

type envSelection struct {
	env    string
	secret string
}

type docGrant struct {
	id  string
	ops []item
}

type docRoute struct {
	idx        int
	id         string
	matchType  string
	source     string
	binding    string
	bindingSet bool // binding is present and a string
	effect     Effect
	samples    []*docSample
}

// docSample is one of a route's named sample Events.
type docSample struct {
	name      string
	node      *node
	typ       string
	source    string
	key       string
	data      *node
	usable    bool // every member read cleanly
	typeKnown bool
}

// schema reads nodes, reporting into is.
type schema struct {
	is *issues
}

// parseDocument runs the strict parse: size, syntax, then the schema.
func parseDocument(data []byte, is *issues) *doc {
	d := &doc{limits: DefaultLimits(), secretsOK: true, scopesOK: true,
		secrets: map[string]*docSecret{}, extensions: map[string]*docExtension{}, scopes: map[string]*docScope{}}
	if len(data) > MaxSize {
		is.add(nil, CodeTooLarge, "the file is larger than 1 MiB: split what is not needed out of it")
		return d
	}
	root := parseTree(data, is)
	if root == nil {
		return d
	}
	d.root = root
	s := &schema{is: is}
	s.readRoot(root, d)
	return d
}

func (s *schema) add(path []step, code Code, remedy string) { s.is.add(path, code, remedy) }

func (s *schema) wrongType(n *node, what string) {
	s.add(n.path(), CodeWrongType, "give "+what+" here")
}

// object reports whether n is a usable object.
func (s *schema) object(n *node, what string) bool {
	if n.bad {
		return false
	}
	if n.kind != kindObject {
		s.wrongType(n, what)
		return false
	}
	return true
}

func (s *schema) unknown(n *node, name, fields string) {
	s.add(n.child(name), CodeUnknownField, "remove this member or correct its name: the members here are "+fields)
}

func (s *schema) missing(n *node, name, what string) {
	s.add(n.child(name), CodeMissingField, "add "+what)
}

func (s *schema) str(n *node) (string, bool) {
	if n.bad {
		return "", false
	}
	if n.kind != kindString {
		s.wrongType(n, "a string")
		return "", false
	}
	return n.text, true
}

func (s *schema) boolean(n *node) (bool, bool) {
	if n.bad {
		return false, false
	}
	if n.kind != kindBool {
		s.wrongType(n, "true or false")
		return false, false
	}
	return n.boolean, true
}

var wholeNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)

// integer reads a whole number between lo and hi.
func (s *schema) integer(n *node, lo, hi int64) (int64, bool) {
	if n.bad {
		return 0, false
	}
	if n.kind != kindNumber || !wholeNumber.MatchString(n.text) {
		s.wrongType(n, "a whole number (no fraction or exponent)")
		return 0, false
	}
	v, err := strconv.ParseInt(n.text, 10, 64)
	if err != nil || v < lo || v > hi {
		s.add(n.path(), CodeInvalidValue, "give a whole number from "+strconv.FormatInt(lo, 10)+" to "+strconv.FormatInt(hi, 10))
		return 0, false
	}
	return v, true
}

// duration reads a Go duration string between lo and hi.
func (s *schema) duration(n *node, lo, hi time.Duration) (time.Duration, bool) {
	t, ok := s.str(n)
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(t)
	if err != nil || d < lo || d > hi {
		s.add(n.path(), CodeInvalidValue, "give a duration such as \"30s\", \"5m\" or \"1h\" from "+lo.String()+" to "+hi.String())
		return 0, false
	}
	return d, true
}

// strings reads an array of strings; elements that are not strings are
// reported and left out.
func (s *schema) strings(n *node) []item {
	if n.bad {
		return nil
	}
	if n.kind != kindArray {
		s.wrongType(n, "an array of strings")
		return nil
	}
	var out []item
	for i, e := range n.elems {
		if v, ok := s.str(e); ok {
			out = append(out, item{idx: i, s: v})
		}
	}
	return out
}

// operations reads an operation list, reporting elements that are not
// strings or not shaped as entries. It reports whether every element was
// well-formed, so that the list's meaning is known.
func (s *schema) operations(n *node) ([]item, bool) {
	items := s.strings(n)
	ok := n.kind == kindArray && len(items) == len(n.elems)
	out := items[:0:0]
	for _, it := range items {
		if _, valid := parseEntry(it.s); !valid {
			s.add(n.elems[it.idx].path(), CodeInvalidValue, remedyEntry)
			ok = false
			continue
		}
		out = append(out, it)
	}
	return out, ok
}

const rootFields = "version, limits, ingress, secrets, extensions and scopes"

func (s *schema) readRoot(n *node, d *doc) {
	if !s.object(n, "one JSON object, the configuration") {
		return
	}
	if v := lookup(n, "version"); v == nil {
		s.missing(n, "version", `"version": 1 as the first member`)
	} else if !v.bad {
		switch {
		case v.kind != kindNumber || !wholeNumber.MatchString(v.text):
			s.wrongType(v, "the number 1")
		case v.text != "1":
			// Nothing else can be read against the wrong version's schema.
			s.add(v.path(), CodeUnsupportedVersion, "this release reads version 1 only: write the configuration for version 1")
			d.stop = true
			return
		default:
			d.version = 1
		}
	}
	for _, m := range n.members {
		v := m.value
		switch m.name {
		case "version":
		case "limits":
			s.readLimits(v, &d.limits)
		case "ingress":
			s.readIngress(v, &d.ingress)
		case "secrets":
			d.secretsOK = s.readSecrets(v, d.secrets)
		case "extensions":
			s.readExtensions(v, d.extensions)
		case "scopes":
			d.scopesOK = s.readScopes(v, d.scopes)
		default:
			s.unknown(n, m.name, rootFields)
		}
	}
}

func lookup(n *node, name string) *node {
	for _, m := range n.members {
		if m.name == name {
			return m.value
		}
	}
	return nil
}

func (s *schema) readIngress(n *node, in *Ingress) {
	if !s.object(n, "an object: the webhook listener's listen and allow_non_loopback") {
		return
	}
	var listen *node
	for _, m := range n.members {
		v := m.value
		switch m.name {
		case "listen":
			if x, ok := s.str(v); ok {
				if !extension.ValidListen(x) {
					s.add(v.path(), CodeInvalidValue, "give host:port, the host an IP address or localhost and the port a number from 0 to 65535, such as 127.0.0.1:8787")
				} else {
					in.Listen, listen = x, v
				}
			}
		case "allow_non_loopback":
			if x, ok := s.boolean(v); ok {
				in.AllowNonLoopback = x
			}
		default:
			s.unknown(n, m.name, "listen and allow_non_loopback")
		}
	}
	if listen != nil && !extension.LoopbackListen(in.Listen) && !in.AllowNonLoopback {
		s.add(listen.path(), CodeInvalidValue, "this address is not loopback, so the webhook listener would be reachable from other machines: listen on 127.0.0.1 behind a reverse proxy or tunnel, or set allow_non_loopback to true")
	}
}

// Bounds of the limits.
const (
	maxCausalDepth     = 1024
	maxCausalPerMinute = 100000
	maxMaxRunning      = 1024
	minAttemptTimeout  = time.Second
	maxAttemptTimeout  = 7 * 24 * time.Hour
	// minLease leaves room for the daemon's renewal every third of a lease
	// inside the 5 s before expiry when a holder stops trusting it
	// (runtime.DefaultLeaseMargin): a shorter lease could never be renewed
	// in time, and every toolbelt call would be refused.
	minLease = 15 * time.Second
	maxLease = time.Hour
)

func (s *schema) readLimits(n *node, l *Limits) {
	if !s.object(n, "an object of limits") {
		return
	}
	for _, m := range n.members {
		v := m.value
		switch m.name {
		case "causal_max_depth":
			if x, ok := s.integer(v, 1, maxCausalDepth); ok {
				l.CausalMaxDepth = int(x)
			}
		case "causal_per_minute":
			if x, ok := s.integer(v, 1, maxCausalPerMinute); ok {
				l.CausalPerMinute = int(x)
			}
		case "max_running":
			if x, ok := s.integer(v, 1, maxMaxRunning); ok {
				l.MaxRunning = int(x)
			}
		case "attempt_timeout":
			if x, ok := s.duration(v, minAttemptTimeout, maxAttemptTimeout); ok {
				l.AttemptTimeout = x
			}
		case "lease":
			if x, ok := s.duration(v, minLease, maxLease); ok {
				l.Lease = x
			}
		default:
			s.unknown(n, m.name, "causal_max_depth, causal_per_minute, max_running, attempt_timeout and lease")
		}
	}
}

func (s *schema) readSecrets(n *node, out map[string]*docSecret) bool {
	if !s.object(n, "an object mapping secret names to references") {
		return false
	}
	for _, m := range n.members {
		if !validSecretName(m.name) {
			s.add(n.child(m.name), CodeInvalidValue, "a secret name is a lower-case letter followed by up to 62 lower-case letters, digits, '-' or '_': rename it")
			continue
		}
		sec := &docSecret{}
		out[m.name] = sec
		text, ok := s.str(m.value)
		if !ok {
			continue
		}
		if IsRedactedReference(text) {
			s.add(m.value.path(), CodeInvalidSecretReference, "this is the redacted form `open-conduit config get` shows, and the active configuration has no reference of this scheme for this secret to keep: write the reference itself")
			continue
		}
		ref, err := ParseSecretRef(text)
		if err != nil {
			s.add(m.value.path(), CodeInvalidSecretReference, err.(*SecretError).Message)
			continue
		}
		sec.ref = ref
	}
	return true
}

func (s *schema) readExtensions(n *node, out map[string]*docExtension) {
	if !s.object(n, "an object of extension entries") {
		return
	}
	for _, m := range n.members {
		if !validExtensionName(m.name) {
			s.add(n.child(m.name), CodeInvalidValue, "an extension is named by its registration name: a lower-case letter followed by lower-case letters, digits, '-' or '_'")
			continue
		}
		e := &docExtension{enabled: true}
		out[m.name] = e
		if !s.object(m.value, `an object such as {"enabled": true, "scopes": ["ops"], "config": {}}`) {
			continue
		}
		for _, f := range m.value.members {
			switch f.name {
			case "enabled":
				if b, ok := s.boolean(f.value); ok {
					e.enabled = b
				}
			case "scopes":
				e.scopesSet = true
				for _, it := range s.strings(f.value) {
					if !validID(it.s) {
						s.add(f.value.elems[it.idx].path(), CodeInvalidValue, "name a scope by its id")
						continue
					}
					e.scopes = append(e.scopes, it)
				}
			case "config":
				if s.object(f.value, "an object, the extension's own config") {
					e.config = f.value
				}
			default:
				s.unknown(m.value, f.name, "enabled, scopes and config")
			}
		}
	}
}

// idRemedy is the remedy of a malformed id of a thing (scope, binding,
// grant, route).
func idRemedy(thing string) string {
	return "a " + thing + " id is a lower-case letter followed by up to 62 lower-case letters, digits or '-': rename it"
}

func (s *schema) readScopes(n *node, out map[string]*docScope) bool {
	if !s.object(n, "an object mapping scope ids to scopes") {
		return false
	}
	for _, m := range n.members {
		if !validID(m.name) {
			s.add(n.child(m.name), CodeInvalidValue, idRemedy("scope"))
			continue
		}
		sc := &docScope{id: m.name, enabled: true, authOK: true, bindings: map[string]*docBinding{}, bindingsOK: true}
		out[m.name] = sc
		s.readScope(m.value, sc)
	}
	return true
}

const scopeFields = "parent, enabled, removed, authorization, bindings and routes"

func (s *schema) readScope(n *node, sc *docScope) {
	if !s.object(n, "a scope object") {
		sc.broken = true
		return
	}
	for _, m := range n.members {
		v := m.value
		switch m.name {
		case "parent":
			sc.parentSet = true
			if p, ok := s.str(v); ok {
				if validID(p) {
					sc.parent, sc.parentOK = p, true
				} else {
					s.add(v.path(), CodeInvalidValue, "name the parent scope by its id")
				}
			}
		case "enabled":
			if b, ok := s.boolean(v); ok {
				sc.enabled = b
			}
		case "removed":
			if b, ok := s.boolean(v); ok {
				sc.removed = b
			}
		case "authorization":
			s.readAuthorization(v, sc)
		case "bindings":
			sc.bindingsOK = s.readBindings(v, sc.bindings)
		case "routes":
			s.readRoutes(v, sc)
		default:
			s.unknown(n, m.name, scopeFields)
		}
	}
}

func (s *schema) readAuthorization(n *node, sc *docScope) {
	if !s.object(n, `an object such as {"operations": [...], "reads": [...], "emit": [...], "egress": [...]}`) {
		sc.authOK = false
		return
	}
	for _, m := range n.members {
		switch m.name {
		case "operations":
			var ok bool
			sc.ops, ok = s.operations(m.value)
			sc.authOK = sc.authOK && ok
		case "reads":
			reads := s.strings(m.value)
			sc.authOK = sc.authOK && m.value.kind == kindArray && len(reads) == len(m.value.elems)
			for _, it := range reads {
				if !slices.Contains(Reads, it.s) {
					s.add(m.value.elems[it.idx].path(), CodeInvalidValue, "a read is one of work, events, executions, artifacts or waits")
					continue
				}
				sc.reads = append(sc.reads, it)
			}
		case "emit":
			sc.emitSet = true
			families := s.strings(m.value)
			sc.authOK = sc.authOK && m.value.kind == kindArray && len(families) == len(m.value.elems)
			for _, it := range families {
				switch {
				case it.s == "core":
					s.add(m.value.elems[it.idx].path(), CodeInvalidValue, "the core family is the host's own; an execution never emits it: remove it")
					sc.authOK = false
				case extension.RegistrationName(it.s) != nil:
					s.add(m.value.elems[it.idx].path(), CodeInvalidValue, `an event family is the first segment of an event type ("deploy" for deploy.done): a lower-case letter followed by lower-case letters, digits, - or _`)
					sc.authOK = false
				default:
					sc.emit = append(sc.emit, it)
				}
			}
		case "egress":
			sc.egressSet = true
			sc.egress, sc.egressOK = s.egressList(m.value)
		default:
			s.unknown(n, m.name, "operations, reads, emit and egress")
		}
	}
}

func (s *schema) readBindings(n *node, out map[string]*docBinding) bool {
	if !s.object(n, "an object mapping binding ids to bindings") {
		return false
	}
	for _, m := range n.members {
		if !validID(m.name) {
			s.add(n.child(m.name), CodeInvalidValue, idRemedy("binding"))
			continue
		}
		b := &docBinding{id: m.name, grants: map[string]*docGrant{}}
		out[m.name] = b
		s.readBinding(m.value, b)
	}
	return true
}

const bindingFields = "executor, config, operations, secrets, grants, requires, playbook and egress"

func (s *schema) readBinding(n *node, b *docBinding) {
	if !s.object(n, "a binding object") {
		b.broken = true
		return
	}
	hasExecutor := false
	for _, m := range n.members {
		v := m.value
		switch m.name {
		case "executor":
			hasExecutor = true
			b.executor, _ = s.str(v)
		case "config":
			if s.object(v, "an object, the executor's config") {
				b.config = v
			}
		case "operations":
			b.ops, _ = s.operations(v)
		case "secrets":
			s.readBindingSecrets(v, b)
		case "grants":
			s.readGrants(v, b)
		case "egress":
			b.egress, _ = s.egressList(v)
		case "requires":
			for _, it := range s.strings(v) {
				switch executor.Capability(it.s) {
				case executor.CapToolbelt, executor.CapResume:
					b.requires = append(b.requires, it)
				default:
					s.add(v.elems[it.idx].path(), CodeInvalidValue, "a required capability is toolbelt or resume")
				}
			}
		case "playbook":
			if p, ok := s.str(v); ok {
				if validPlaybookName(p) {
					b.playbook = p
				} else {
					s.add(v.path(), CodeInvalidValue, "a playbook name is a lower-case letter followed by up to 62 lower-case letters, digits, '-' or '_'")
				}
			}
		default:
			s.unknown(n, m.name, bindingFields)
		}
	}
	if !hasExecutor {
		s.missing(n, "executor", `"executor", the name of a registered executor such as "shell"`)
	}
}

func (s *schema) readBindingSecrets(n *node, b *docBinding) {
	if !s.object(n, "an object mapping environment variable names to secret names") {
		return
	}
	for _, m := range n.members {
		switch {
		case !validEnvName(m.name):
			s.add(n.child(m.name), CodeInvalidValue, "an environment variable name is upper-case letters, digits and '_', not starting with a digit: rename it")
			continue
		case reservedEnvName(m.name):
			s.add(n.child(m.name), CodeInvalidValue, "the host sets this variable itself (OS_ENDPOINT, OS_TOKEN_FILE and every OPEN_CONDUIT_ name): choose another name")
			continue
		}
		if name, ok := s.str(m.value); ok {
			b.secrets = append(b.secrets, envSelection{env: m.name, secret: name})
		}
	}
	slices.SortFunc(b.secrets, func(x, y envSelection) int { return cmp.Compare(x.env, y.env) })
}

func (s *schema) readGrants(n *node, b *docBinding) {
	if !s.object(n, "an object mapping grant ids to grants") {
		return
	}
	for _, m := range n.members {
		if !validID(m.name) {
			s.add(n.child(m.name), CodeInvalidValue, idRemedy("grant"))
			continue
		}
		g := &docGrant{id: m.name}
		b.grants[m.name] = g
		if !s.object(m.value, `an object such as {"operations": [...]}`) {
			continue
		}
		for _, f := range m.value.members {
			switch f.name {
			case "operations":
				g.ops, _ = s.operations(f.value)
			default:
				s.unknown(m.value, f.name, "operations")
			}
		}
	}
}

func (s *schema) readRoutes(n *node, sc *docScope) {
	if n.bad {
		return
	}
	if n.kind != kindArray {
		s.wrongType(n, "an array of routes, in the order they are tried")
		return
	}
	for i, e := range n.elems {
		if !s.object(e, `a route object such as {"id": "manual", "match": {"type": "core.manual"}, "binding": "agent"}`) {
			continue
		}
		r := &docRoute{idx: i, effect: EffectStart}
		sc.routes = append(sc.routes, r)
		hasID, hasMatch, hasBinding, effectOK := false, false, false, true
		for _, m := range e.members {
			v := m.value
			switch m.name {
			case "id":
				hasID = true
				if id, ok := s.str(v); ok {
					if validID(id) {
						r.id = id
					} else {
						s.add(v.path(), CodeInvalidValue, idRemedy("route"))
					}
				}
			case "match":
				hasMatch = true
				s.readMatch(v, r)
			case "binding":
				hasBinding = true
				r.binding, r.bindingSet = s.str(v)
			case "samples":
				s.readSamples(v, r)
			case "effect":
				effectOK = false
				if t, ok := s.str(v); ok {
					switch Effect(t) {
					case EffectStart, EffectQueue, EffectInject, EffectInterrupt, EffectDrop:
						r.effect, effectOK = Effect(t), true
					default:
						s.add(v.path(), CodeInvalidValue, "an effect is start, queue, inject, interrupt or drop")
					}
				}
			default:
				s.unknown(e, m.name, "id, match, binding, effect and samples")
			}
		}
		if !hasID {
			s.missing(e, "id", `"id", the route's id, unique in its scope`)
		}
		if !hasMatch {
			s.missing(e, "match", `"match", such as {"type": "core.manual"}`)
		}
		if effectOK && r.effect == EffectStart && !hasBinding {
			s.missing(e, "binding", `"binding", the binding of this scope that starts the Work`)
		}
		if hasMatch && r.matchType != "" {
			for _, sm := range r.samples {
				if sm.usable && sm.typeKnown && !sampleMatches(r, sm) {
					s.add(sm.node.path(), CodeInvalidValue, "a route's sample is an Event the route matches: give it a type (and source) of the route's match")
				}
			}
		}
	}
}

// sampleMatches reports whether the route matches its sample, whose
// source defaults to core.manual as an operator's trace does.
func sampleMatches(r *docRoute, sm *docSample) bool {
	source := sm.source
	if source == "" {
		source = "core.manual"
	}
	if prefix, ok := strings.CutSuffix(r.matchType, ".*"); ok {
		if !strings.HasPrefix(sm.typ, prefix+".") {
			return false
		}
	} else if r.matchType != sm.typ {
		return false
	}
	return r.source == "" || r.source == source
}

// readSamples reads a route's samples: named Events an operator traces by
// name (open-conduit route --trace NAME). A sample is what an operator's
// trace could send: an event type that is not core, a source that is not a
// core source other than core.manual and core.action, a correlation key
// and object data.
func (s *schema) readSamples(n *node, r *docRoute) {
	if !s.object(n, `an object mapping sample names to Events such as {"type": "deploy.requested"}`) {
		return
	}
	for _, m := range n.members {
		if !validID(m.name) {
			s.add(n.child(m.name), CodeInvalidValue, idRemedy("sample"))
			continue
		}
		sm := &docSample{name: m.name, node: m.value, usable: true}
		r.samples = append(r.samples, sm)
		if !s.object(m.value, `an Event such as {"type": "deploy.requested", "correlation_key": "deploy/main"}`) {
			sm.usable = false
			continue
		}
		hasType := false
		for _, f := range m.value.members {
			v := f.value
			switch f.name {
			case "type":
				hasType = true
				t, ok := s.str(v)
				switch {
				case !ok:
					sm.usable = false
				case !validEventType(t) || strings.HasPrefix(t, "core."):
					s.add(v.path(), CodeInvalidValue, "a sample's type is a namespaced event type such as deploy.requested, not a prefix and not core.*")
					sm.usable = false
				default:
					sm.typ, sm.typeKnown = t, true
				}
			case "source":
				t, ok := s.str(v)
				switch {
				case !ok:
					sm.usable = false
				case !validEventType(t) || (strings.HasPrefix(t, "core.") && t != "core.manual" && t != "core.action"):
					s.add(v.path(), CodeInvalidValue, "a sample's source is a namespaced name such as core.manual; of the core sources only core.manual and core.action")
					sm.usable = false
				default:
					sm.source = t
				}
			case "correlation_key":
				t, ok := s.str(v)
				switch {
				case !ok:
					sm.usable = false
				case t == "" || len(t) > maxSampleKey:
					s.add(v.path(), CodeInvalidValue, fmt.Sprintf("a sample's correlation key is 1 to %d bytes", maxSampleKey))
					sm.usable = false
				default:
					sm.key = t
				}
			case "data":
				if !s.object(v, "a JSON object") {
					sm.usable = false
					continue
				}
				sm.data = v
			default:
				s.unknown(m.value, f.name, "type, source, correlation_key and data")
				sm.usable = false
			}
		}
		if !hasType {
			s.missing(m.value, "type", `"type", the sample's event type such as deploy.requested`)
			sm.usable = false
		}
	}
}

// maxSampleKey bounds a sample's correlation key.
const maxSampleKey = 256

func (s *schema) readMatch(n *node, r *docRoute) {
	if !s.object(n, `an object such as {"type": "core.manual", "source": "core.manual"}`) {
		return
	}
	hasType := false
	for _, m := range n.members {
		v := m.value
		switch m.name {
		case "type":
			hasType = true
			if t, ok := s.str(v); ok {
				if validMatchType(t) {
					r.matchType = t
				} else {
					s.add(v.path(), CodeInvalidValue, "a type is an event type such as core.manual, or a prefix such as github.*")
				}
			}
		case "source":
			if t, ok := s.str(v); ok {
				if validEventType(t) {
					r.source = t
				} else {
					s.add(v.path(), CodeInvalidValue, "a source is a namespaced name such as core.manual")
				}
			}
		default:
			s.unknown(n, m.name, "type and source")
		}
	}
	if !hasType {
		s.missing(n, "type", `"type", an event type such as core.manual or a prefix such as github.*`)
	}
}

// config builds the public Config of a document that parsed cleanly.
func (d *doc) config() *Config {
	c := &Config{Version: int(d.version), Limits: d.limits, Ingress: d.ingress,
		Secrets: map[string]SecretRef{}, Extensions: map[string]Extension{}, Scopes: map[string]*Scope{}}
	for name, sec := range d.secrets {
		c.Secrets[name] = sec.ref
	}
	for name, e := range d.extensions {
		ext := Extension{Enabled: e.enabled}
		if e.scopesSet {
			ext.Scopes = append([]string{}, itemStrings(e.scopes)...)
		}
		if e.config != nil {
			if raw, err := e.config.canonical(nil); err == nil {
				ext.Config = json.RawMessage(raw)
			}
		}
		c.Extensions[name] = ext
	}
	for id, sc := range d.scopes {
		out := &Scope{ID: id, Parent: sc.parent, Enabled: sc.enabled, Removed: sc.removed,
			Authorization: Authorization{Operations: itemStrings(sc.ops), Reads: itemStrings(sc.reads)},
			Bindings:      map[string]*Binding{}}
		if sc.emitSet {
			out.Authorization.Emit = append([]string{}, itemStrings(sc.emit)...)
		}
		if sc.egressSet {
			out.Authorization.Egress = egressStrings(sc.egress)
		}
		for bid, b := range sc.bindings {
			out.Bindings[bid] = b.binding()
		}
		for _, r := range sc.routes {
			rt := Route{ID: r.id, Match: Match{Type: r.matchType, Source: r.source}, Binding: r.binding, Effect: r.effect}
			for _, sm := range r.samples {
				smp := Sample{Name: sm.name, Type: sm.typ, Source: sm.source, CorrelationKey: sm.key}
				if sm.data != nil {
					if raw, err := sm.data.canonical(nil); err == nil {
						smp.Data = json.RawMessage(raw)
					}
				}
				rt.Samples = append(rt.Samples, smp)
			}
			out.Routes = append(out.Routes, rt)
		}
		c.Scopes[id] = out
	}
	return c
}

func (b *docBinding) binding() *Binding {
	out := &Binding{ID: b.id, Executor: b.executor, Operations: itemStrings(b.ops),
		Secrets: map[string]string{}, Grants: map[string]Grant{}, Playbook: b.playbook, Config: json.RawMessage("{}")}
	if b.config != nil {
		if raw, err := b.config.canonical(nil); err == nil {
			out.Config = json.RawMessage(raw)
		}
	}
	for _, sel := range b.secrets {
		out.Secrets[sel.env] = sel.secret
	}
	for gid, g := range b.grants {
		out.Grants[gid] = Grant{ID: gid, Operations: itemStrings(g.ops)}
	}
	for _, it := range b.requires {
		out.Requires = append(out.Requires, executor.Capability(it.s))
	}
	out.Egress = egressStrings(b.egress)
	return out
}
