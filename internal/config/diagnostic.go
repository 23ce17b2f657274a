package config

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Code is a stable diagnostic code. The set is fixed; docs/config.md has a
// table of them.
type Code string

// The diagnostic codes.
const (
	CodeInvalidJSON            Code = "invalid_json"
	CodeTooLarge               Code = "too_large"
	CodeTooDeep                Code = "too_deep"
	CodeDuplicateKey           Code = "duplicate_key"
	CodeUnknownField           Code = "unknown_field"
	CodeNullValue              Code = "null_value"
	CodeWrongType              Code = "wrong_type"
	CodeMissingField           Code = "missing_field"
	CodeInvalidValue           Code = "invalid_value"
	CodeUnsupportedVersion     Code = "unsupported_version"
	CodeUnknownReference       Code = "unknown_reference"
	CodeCycle                  Code = "cycle"
	CodeAuthorityWidening      Code = "authority_widening"
	CodeOperationDenied        Code = "operation_denied"
	CodeInvalidCapability      Code = "invalid_capability"
	CodeInvalidSecretReference Code = "invalid_secret_reference"
	// CodeScopeSlotTaken is the configuration service's, not Validate's: a
	// scope id an earlier generation removed, named again for another
	// scope while Work of the old one is in the store.
	CodeScopeSlotTaken Code = "scope_slot_taken"
)

// Diagnostic is one problem of a configuration: an RFC 6901 pointer to the
// offending member or array element, a stable code, and a remedy a person
// can act on. It never contains a configured value: a pointer names only
// member names that pass the naming rule of their place, and stops at the
// enclosing object when one does not.
type Diagnostic struct {
	Pointer string `json:"pointer"`
	Code    Code   `json:"code"`
	Remedy  string `json:"remedy"`
}

func (d Diagnostic) String() string {
	p := d.Pointer
	if p == "" {
		p = "(document)"
	}
	return p + ": " + string(d.Code) + ": " + d.Remedy
}

// Warning is something a valid configuration probably did not mean. It never
// fails the configuration.
type Warning struct {
	Pointer string `json:"pointer"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (w Warning) String() string {
	p := w.Pointer
	if p == "" {
		p = "(document)"
	}
	return p + ": " + w.Code + ": " + w.Message
}

// Result is the outcome of a validation: every diagnostic, in a
// deterministic order, and the warnings of a valid configuration.
type Result struct {
	Diagnostics []Diagnostic `json:"diagnostics"`
	Warnings    []Warning    `json:"warnings"`
}

// Valid reports whether the configuration had no diagnostic.
func (r Result) Valid() bool { return len(r.Diagnostics) == 0 }

// Err returns nil for a valid result and an *Error holding the diagnostics
// otherwise.
func (r Result) Err() error {
	if r.Valid() {
		return nil
	}
	return &Error{Diagnostics: r.Diagnostics}
}

// Error is an invalid configuration as an error value. Its message names
// the number of problems and the first one, which is safe to show.
type Error struct {
	Diagnostics []Diagnostic
}

func (e *Error) Error() string {
	if len(e.Diagnostics) == 0 {
		return "config: invalid"
	}
	first := e.Diagnostics[0]
	if len(e.Diagnostics) == 1 {
		return "config: invalid: " + first.String()
	}
	return fmt.Sprintf("config: invalid, %d problems; first: %s", len(e.Diagnostics), first)
}

// maxDiagnostics bounds how many diagnostics one check reports, so that a
// hostile file (a megabyte of nulls) cannot make the answer huge. Past it,
// the rest is not reported; fixing the reported ones and checking again
// shows them.
const maxDiagnostics = 1000

// step is one token of a path: an object member's name, or an array index
// (idx >= 0).
type step struct {
	key string
	idx int
}

func keyStep(k string) step { return step{key: k, idx: -1} }
func idxStep(i int) step    { return step{idx: i} }

// issue is a diagnostic before its path is rendered safely.
type issue struct {
	path   []step
	code   Code
	remedy string
}

// issues collects diagnostics up to maxDiagnostics.
type issues struct {
	list []issue
}

func (is *issues) add(path []step, code Code, remedy string) {
	if len(is.list) >= maxDiagnostics {
		return
	}
	is.list = append(is.list, issue{path: slices.Clone(path), code: code, remedy: remedy})
}

func (is *issues) full() bool { return len(is.list) >= maxDiagnostics }

// render turns the collected issues into diagnostics with safe pointers, in
// the order of their pointers (array elements by index), then code, then
// remedy, so that the order depends neither on the walk nor on the order of
// the members in the file.
func (is *issues) render() []Diagnostic {
	type keyed struct {
		steps []step
		d     Diagnostic
	}
	out := make([]keyed, 0, len(is.list))
	for _, it := range is.list {
		steps := safeSteps(it.path)
		out = append(out, keyed{steps: steps, d: Diagnostic{Pointer: pointer(steps), Code: it.code, Remedy: it.remedy}})
	}
	slices.SortStableFunc(out, func(a, b keyed) int {
		if c := compareSteps(a.steps, b.steps); c != 0 {
			return c
		}
		if c := cmp.Compare(a.d.Code, b.d.Code); c != 0 {
			return c
		}
		return cmp.Compare(a.d.Remedy, b.d.Remedy)
	})
	ds := make([]Diagnostic, len(out))
	for i, k := range out {
		ds[i] = k.d
	}
	return ds
}

func compareSteps(a, b []step) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		x, y := a[i], b[i]
		switch {
		case x.idx >= 0 && y.idx >= 0:
			if c := cmp.Compare(x.idx, y.idx); c != 0 {
				return c
			}
		case x.idx >= 0:
			return -1
		case y.idx >= 0:
			return 1
		default:
			if c := strings.Compare(x.key, y.key); c != 0 {
				return c
			}
		}
	}
	return cmp.Compare(len(a), len(b))
}

// RFC 6901 escaping of one token of a pointer, and its reverse.
var (
	escapeToken   = strings.NewReplacer("~", "~0", "/", "~1")
	unescapeToken = strings.NewReplacer("~1", "/", "~0", "~")
)

// pointer renders steps as an RFC 6901 JSON pointer.
func pointer(steps []step) string {
	var b strings.Builder
	for _, s := range steps {
		b.WriteByte('/')
		if s.idx >= 0 {
			b.WriteString(strconv.Itoa(s.idx))
			continue
		}
		b.WriteString(escapeToken.Replace(s.key))
	}
	return b.String()
}

// place is where a value sits in the version 1 schema; it decides which
// member names are safe to show in a pointer.
type place int

const (
	placeUnknown place = iota // under a member the schema does not know
	placeRoot
	placeLimits
	placeIngress
	placeSecrets
	placeExtensions
	placeExtension
	placeScopes
	placeScope
	placeAuthorization
	placeBindings
	placeBinding
	placeBindingSecrets
	placeGrants
	placeGrant
	placeRoutes
	placeRoute
	placeMatch
	placeSamples
	placeSample
	placeList // an array of strings
	placeFree // an executor's config: free form
	placeLeaf // a scalar member
)

// fixedFields lists the members of each fixed-shape object and their place.
var fixedFields = map[place]map[string]place{
	placeRoot: {"version": placeLeaf, "limits": placeLimits, "ingress": placeIngress, "secrets": placeSecrets,
		"extensions": placeExtensions, "scopes": placeScopes},
	placeLimits: {"causal_max_depth": placeLeaf, "causal_per_minute": placeLeaf,
		"max_running": placeLeaf, "attempt_timeout": placeLeaf, "lease": placeLeaf},
	placeIngress:   {"listen": placeLeaf, "allow_non_loopback": placeLeaf},
	placeExtension: {"enabled": placeLeaf, "scopes": placeList, "config": placeFree},
	placeScope: {"parent": placeLeaf, "enabled": placeLeaf, "removed": placeLeaf,
		"authorization": placeAuthorization, "bindings": placeBindings, "routes": placeRoutes},
	placeAuthorization: {"operations": placeList, "reads": placeList},
	placeBinding: {"executor": placeLeaf, "config": placeFree, "operations": placeList,
		"secrets": placeBindingSecrets, "grants": placeGrants, "requires": placeList, "playbook": placeLeaf},
	placeGrant:  {"operations": placeList},
	placeRoute:  {"id": placeLeaf, "match": placeMatch, "binding": placeLeaf, "effect": placeLeaf, "samples": placeSamples},
	placeSample: {"type": placeLeaf, "source": placeLeaf, "correlation_key": placeLeaf, "data": placeFree},
	placeMatch:  {"type": placeLeaf, "source": placeLeaf},
}

// keyedMaps lists the objects keyed by a name, the rule the name must pass
// and the place of each member's value.
var keyedMaps = map[place]struct {
	valid func(string) bool
	value place
}{
	placeSecrets:        {validSecretName, placeLeaf},
	placeExtensions:     {validExtensionName, placeExtension},
	placeScopes:         {validID, placeScope},
	placeBindings:       {validID, placeBinding},
	placeBindingSecrets: {validEnvName, placeLeaf},
	placeGrants:         {validID, placeGrant},
	placeSamples:        {validID, placeSample},
}

// next returns the place of the member or element s of a value at p, and
// whether s is safe to show.
func (p place) next(s step) (place, bool) {
	if s.idx >= 0 {
		switch p {
		case placeRoutes:
			return placeRoute, true
		case placeList:
			return placeLeaf, true
		case placeFree:
			return placeFree, true
		}
		return placeUnknown, true
	}
	if fields, ok := fixedFields[p]; ok {
		if q, ok := fields[s.key]; ok {
			return q, true
		}
		return placeUnknown, fieldShaped(s.key)
	}
	if m, ok := keyedMaps[p]; ok {
		return m.value, m.valid(s.key)
	}
	if p == placeFree {
		return placeFree, freeKeyShaped(s.key)
	}
	return placeUnknown, fieldShaped(s.key)
}

// safeSteps cuts a path before its first member name that is not safe to
// show, so that the pointer names the nearest enclosing value instead.
func safeSteps(path []step) []step {
	p := placeRoot
	for i, s := range path {
		q, ok := p.next(s)
		if !ok {
			return path[:i]
		}
		p = q
	}
	return path
}
