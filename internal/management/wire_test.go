package management

import (
	"encoding/base64"
	stdjson "encoding/json"
	"fmt"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/internal/bearer"
	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/configsvc"
	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/httpapi"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
	"github.com/open-conduit/open-conduit/internal/toolbeltapi"
)

// These tests prove that every conversion of wire.go sends the bytes the
// handlers send today by marshalling a storage record or a response
// struct, with the server's own encoder (render: go-json-experiment,
// Deterministic). Each record is tried filled (every field set, by
// reflection, so a field added later is covered too) and empty (zero
// values, nil slices and raw members), so storage's JSON tags can be
// dropped once the handlers return the conversions.

// wireBytes encodes v as render does.
func wireBytes(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v, json.Deterministic(true))
	if err != nil {
		t.Fatalf("marshal %T: %v", v, err)
	}
	return string(b)
}

// sameWire fails unless today's body and the conversion's encode alike.
func sameWire(t *testing.T, name string, today, converted any) {
	t.Helper()
	if a, b := wireBytes(t, today), wireBytes(t, converted); a != b {
		t.Errorf("%s: the conversion changes the wire:\ntoday:     %s\nconverted: %s", name, a, b)
	}
}

var wireTime = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)

// fill sets every field of the value v points to: strings to their field's
// name, numbers to 7, booleans to true, times to wireTime, raw JSON to an
// object, and one filled element in every slice and map.
func fill(v any) {
	fillValue(reflect.ValueOf(v).Elem(), "x")
}

var (
	timeType = reflect.TypeFor[time.Time]()
	rawType  = reflect.TypeFor[stdjson.RawMessage]()
)

func fillValue(v reflect.Value, name string) {
	switch {
	case v.Type() == timeType:
		v.Set(reflect.ValueOf(wireTime))
		return
	case v.Type() == rawType:
		v.SetBytes([]byte(`{"k":[1,"two"]}`))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(name)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(7)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fillValue(p.Elem(), name)
		v.Set(p)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes([]byte(name)) // a digest: never sent
			return
		}
		s := reflect.MakeSlice(v.Type(), 2, 2)
		fillValue(s.Index(0), name+"-0")
		fillValue(s.Index(1), name+"-1")
		v.Set(s)
	case reflect.Array:
		for i := range v.Len() {
			fillValue(v.Index(i), name)
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k := reflect.New(v.Type().Key()).Elem()
		fillValue(k, name+"-key")
		e := reflect.New(v.Type().Elem()).Elem()
		fillValue(e, name+"-value")
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillValue(v.Field(i), v.Type().Field(i).Name)
			}
		}
	default:
		panic(fmt.Sprintf("fill: no rule for %s", v.Type()))
	}
}

// samples returns a filled record, its zero value and one with empty,
// non-nil lists.
func samples[T any](t *testing.T, empty func(*T)) map[string]T {
	var full, zero, emptied T
	fill(&full)
	fill(&emptied)
	if empty != nil {
		empty(&emptied)
	}
	return map[string]T{"filled": full, "zero": zero, "emptied": emptied}
}

func TestWireRecords(t *testing.T) {
	for name, e := range samples(t, func(e *storage.Event) { e.Data = stdjson.RawMessage(`{}`) }) {
		sameWire(t, "Event "+name, e, eventOut(e))
	}
	for name, w := range samples(t, func(w *storage.Work) {
		w.Grants, w.OutcomeData, w.State = []string{}, stdjson.RawMessage(`{}`), storage.WorkReady
	}) {
		sameWire(t, "Work "+name, w, workOut(w))
	}
	for name, e := range samples(t, func(e *storage.Execution) {
		zero := 0
		e.ExitCode, e.Result = &zero, storage.ResultNone
	}) {
		sameWire(t, "Execution "+name, e, executionOut(e))
	}
	for name, w := range samples(t, func(w *storage.Wait) { w.Types, w.Keys, w.TimeoutAt = []string{}, []string{}, time.Time{} }) {
		sameWire(t, "Wait "+name, w, waitOut(w))
	}
	for name, a := range samples[storage.Artifact](t, nil) {
		sameWire(t, "Artifact "+name, a, artifactOut(a))
	}
	for name, c := range samples(t, func(c *storage.ToolbeltCall) { c.Epoch, c.Replayed = 0, false }) {
		sameWire(t, "ToolbeltCall "+name, c, toolbeltCallOut(c))
	}
}

func TestWireLists(t *testing.T) {
	var w storage.Work
	fill(&w)
	for name, p := range map[string]Page[storage.Work]{
		"empty": {Items: []storage.Work{}},
		"last":  {Items: []storage.Work{w, {}}},
		"more":  {Items: []storage.Work{w}, NextCursor: "cursor"},
	} {
		sameWire(t, "Page "+name, p, pageOut(p, workOut))
	}
	events := Page[storage.Event]{Items: []storage.Event{{Seq: 1}}, NextCursor: "c"}
	sameWire(t, "Page<Event>", events, pageOut(events, eventOut))
}

func TestWireResults(t *testing.T) {
	for name, d := range samples(t, func(d *kernel.Decision) { d.Routes, d.OtherWakes = []kernel.RouteVerdict{}, []kernel.Wake{} }) {
		sameWire(t, "Trace "+name, TraceResponse{Scope: "setup", Generation: 3, Decision: d}, traceOut("setup", 3, d))
	}
	for name, res := range samples[kernel.CreateWorkResult](t, nil) {
		today := CreateWorkResponse{Work: res.Work, CreatedEvent: res.Created, InputEvent: res.Input, Existing: res.Replayed}
		sameWire(t, "CreatedWork "+name, today, createdWorkOut(res))
	}
	for name, res := range samples(t, func(r *kernel.ControlResult) { r.Execution = storage.Execution{} }) {
		// As runControl builds it: the execution only when one was fenced.
		today := ControlResponse{Event: res.Event, Work: res.Work, Existing: res.Replayed}
		if res.Execution.ID != "" {
			e := res.Execution
			today.Execution = &e
		}
		sameWire(t, "Controlled "+name, today, controlledOut(res))
	}
	for name, res := range samples[kernel.WakeResult](t, nil) {
		sameWire(t, "Woken "+name, WakeResponse{Event: res.Event, Decision: res.Decision, Matched: res.Matched}, wokenOut(res))
	}
	for name, res := range samples[kernel.EmitResult](t, nil) {
		sameWire(t, "Emitted "+name, EmitResponse{Event: res.Event, Decision: res.Decision, Existing: res.Event.Replayed}, emittedOut(res))
	}
	for name, a := range samples(t, func(a *toolbelt.ActionInfo) { a.InputSchema = stdjson.RawMessage(`{"type":"object"}`) }) {
		list := Page[toolbelt.ActionInfo]{Items: []toolbelt.ActionInfo{a}}
		sameWire(t, "Page<Action> "+name, list, pageOut(list, actionOut))
	}
	for name, res := range samples[toolbelt.ActResult](t, nil) {
		sameWire(t, "Acted "+name, ActResponse{Event: res.Event, Result: res.Result, Existing: res.Event.Replayed}, actedOut(res))
	}
}

func TestWireScopes(t *testing.T) {
	full := &config.EffectiveScope{
		ID: "team/ops", Parent: "team", Enabled: true, Active: true,
		Operations: []string{"emit", "wait"}, Reads: []string{"work"},
		Bindings: map[string]*config.EffectiveBinding{
			"b": {ID: "b", Executor: "shell", Config: stdjson.RawMessage(`{"secret":"never shown"}`), Operations: []string{"emit"},
				Grants: map[string][]string{"extra": {"wait"}, "none": nil}, Secrets: map[string]string{"TOKEN": "gh"},
				Requires: []executor.Capability{"resume"}, Playbook: "p", PlaybookOperations: []string{"emit"}},
			"a": {ID: "a", Executor: "shell"},
		},
		Routes: []config.Route{
			{ID: "r1", Match: config.Match{Type: "deploy.*", Source: "core.manual"}, Binding: "b", Effect: config.Effect("start")},
			{ID: "r2", Match: config.Match{Type: "x.y"}, Effect: config.Effect("drop")},
		},
	}
	for name, sc := range map[string]*config.EffectiveScope{
		"filled":    full,
		"tombstone": {ID: "gone", Removed: true},
	} {
		sameWire(t, "Scope "+name, scopeView(sc, 4), scopeOut(sc, 4))
	}
	none := Page[RouteSample]{Items: []RouteSample{}}
	sameWire(t, "Page<Sample>", none, api.Page[api.RouteSample]{Items: []api.RouteSample{}})
}

func TestWireOperators(t *testing.T) {
	local := time.FixedZone("here", 3600)
	active := Credential{ID: "tok_1", Name: "alice", Role: RoleOperate, Digest: bearer.DigestOf("secret"), CreatedAt: wireTime.In(local)}
	revoked := Credential{ID: "tok_2", Name: OwnerName, Role: RoleAdmin, CreatedAt: wireTime, RevokedAt: wireTime.Add(time.Hour).In(local)}
	for name, c := range map[string]Credential{"active": active, "revoked": revoked} {
		sameWire(t, "Operator "+name, infoOf(c), operatorOut(c))
		is := Issued{Credential: c, Token: "the-token"}
		sameWire(t, "Issued "+name, issuedResponse(is), issuedOut(is))
	}
	for _, class := range []Class{ClassOperator, ClassExecution} {
		r := RevokeResult{TokenID: "tok_1", Class: class, Revoked: true}
		sameWire(t, "Revoked "+string(class), r, revokedOut(r))
	}
	sameWire(t, "Revoked zero", RevokeResult{Class: ClassOperator}, revokedOut(RevokeResult{Class: ClassOperator}))
	sameWire(t, "Health", HealthResponse{Status: "ok", Version: "0.1.0", Generation: 3, State: "ready"}, healthOut("0.1.0", 3, "ready"))
	sameWire(t, "Health zero", HealthResponse{Status: "ok"}, healthOut("", 0, ""))
	// No credential's digest reaches the listing.
	if b := wireBytes(t, operatorOut(active)); containsDigest(b, active.Digest) {
		t.Errorf("the operator listing shows a digest: %s", b)
	}
}

func containsDigest(body string, d Digest) bool {
	return strings.Contains(body, fmt.Sprintf("%x", d[:])) || strings.Contains(body, base64.StdEncoding.EncodeToString(d[:]))
}

func TestWireConfig(t *testing.T) {
	local := time.FixedZone("here", -7200)
	g := storage.Generation{Number: 3, Hash: "9f2c", Normalized: stdjson.RawMessage(`{"version":1,"secrets":{"gh":"env:<redacted>"}}`), Actor: "operator:local", CreatedAt: wireTime.In(local)}
	today := ConfigView{Generation: g.Number, Hash: g.Hash, Config: []byte(g.Normalized), Actor: g.Actor, CreatedAt: g.CreatedAt.UTC()}
	sameWire(t, "Config", today, configOut(g))

	diags := []config.Diagnostic{{Pointer: "/scopes/ops/parent", Code: config.Code("unknown_reference"), Remedy: "name a scope"}}
	warns := []config.Warning{{Pointer: "/scopes", Code: "unused", Message: "m"}}
	snap := &config.Snapshot{Hash: "abc"}
	for name, c := range map[string]struct {
		snap *config.Snapshot
		res  config.Result
	}{
		"invalid":     {nil, config.Result{Diagnostics: diags}},
		"valid":       {snap, config.Result{Warnings: warns}},
		"valid empty": {snap, config.Result{Diagnostics: []config.Diagnostic{}, Warnings: []config.Warning{}}},
	} {
		// As validateConfig builds it.
		today := ValidateResponse{Valid: c.res.Valid(), Diagnostics: c.res.Diagnostics, Warnings: c.res.Warnings}
		if c.snap != nil {
			today.Hash = c.snap.Hash
		}
		if today.Diagnostics == nil {
			today.Diagnostics = []config.Diagnostic{}
		}
		if today.Warnings == nil {
			today.Warnings = []config.Warning{}
		}
		sameWire(t, "Validation "+name, today, validationOut(c.snap, c.res))
	}
	for name, res := range map[string]configsvc.ApplyResult{
		"warnings":    {Generation: g, Previous: 2, Warnings: warns},
		"no warnings": {Generation: g, Previous: 2},
	} {
		// As applyConfig builds it.
		today := ApplyResponse{Generation: res.Generation.Number, Hash: res.Generation.Hash, PreviousGeneration: res.Previous, Warnings: res.Warnings}
		if today.Warnings == nil {
			today.Warnings = []config.Warning{}
		}
		sameWire(t, "Applied "+name, today, appliedOut(res))
	}
}

// TestWireEnvelope holds errorOut to the envelope the one error writer
// (httpapi.Writer) sends.
func TestWireEnvelope(t *testing.T) {
	diags := []config.Diagnostic{{Pointer: "/extra", Code: config.Code("unknown_field"), Remedy: "remove it"}}
	for name, c := range map[string]struct {
		code  httpapi.Code
		msg   string
		diags []config.Diagnostic
	}{
		"plain":          {httpapi.CodeForbiddenRole, "needs admin", nil},
		"invalid_config": {httpapi.CodeInvalidConfig, "does not validate", diags},
	} {
		rec := httptest.NewRecorder()
		e := &httpapi.Error{Code: c.code, Message: c.msg}
		if c.diags != nil {
			e.Diagnostics = c.diags
		}
		httpapi.Writer{}.Error(rec, httptest.NewRequest("GET", "/v1/x", nil), e)
		b, err := json.Marshal(errorOut(string(c.code), c.msg, c.diags))
		if err != nil || strings.TrimSpace(rec.Body.String()) != string(b) {
			t.Errorf("envelope %s: the writer sends %s, converted %s (%v)", name, rec.Body.String(), b, err)
		}
	}
}

// TestWireCodes holds the api package's codes to the server's, the
// kernel's and the toolbelt's: the same strings, and the same statuses.
func TestWireCodes(t *testing.T) {
	if got, ok := api.Status(api.CodeGateFailed); !ok || got != 422 {
		t.Errorf("api.Status(gate_failed) = %d, %v", got, ok)
	}
	same := map[string]string{
		kernel.ErrInvalidEvent.Code:        api.CodeInvalidEvent,
		kernel.ErrCoreTypeReserved.Code:    api.CodeCoreTypeReserved,
		kernel.ErrDataTooLarge.Code:        api.CodeDataTooLarge,
		kernel.ErrParentNotFound.Code:      api.CodeParentNotFound,
		kernel.ErrEventConflict.Code:       api.CodeEventConflict,
		kernel.ErrCausalDepthExceeded.Code: api.CodeCausalDepthExceeded,
		kernel.ErrCausalRateExceeded.Code:  api.CodeCausalRateExceeded,
		kernel.ErrWorkNotFound.Code:        api.CodeWorkNotFound,
		kernel.ErrExecutionNotFound.Code:   api.CodeExecutionNotFound,
		kernel.ErrWorkState.Code:           api.CodeWorkState,
		kernel.ErrExecutionState.Code:      api.CodeExecutionState,
		kernel.ErrKeyTaken.Code:            api.CodeKeyTaken,
		kernel.ErrInvalidWork.Code:         api.CodeInvalidWork,
		kernel.ErrActorRequired.Code:       api.CodeActorRequired,
		kernel.ErrStaleEpoch.Code:          api.CodeStaleEpoch,
		kernel.ErrLeaseExpired.Code:        api.CodeLeaseExpired,
		kernel.ErrNotRunning.Code:          api.CodeNotRunning,
		kernel.ErrAuthorityReleased.Code:   api.CodeAuthorityReleased,
		kernel.ErrInvalidDeclaration.Code:  api.CodeInvalidDeclaration,
		kernel.ErrInvalidAction.Code:       api.CodeInvalidAction,
		toolbelt.ErrActionNotFound.Code:    api.CodeActionNotFound,
		toolbelt.ErrRequestConflict.Code:   api.CodeRequestConflict,
		toolbelt.ErrToolbeltForbidden.Code: api.CodeForbidden,
		toolbelt.ErrGateFailed:             api.CodeGateFailed,
		toolbelt.ResultOK:                  api.CallOK,
		toolbelt.ResultForbidden:           api.CallForbidden,
		toolbelt.ResultAuthorityReleased:   api.CallAuthorityReleased,
		toolbelt.ResultRequestConflict:     api.CallRequestConflict,
		toolbelt.ResultInvalid:             api.CallInvalid,
		toolbelt.ResultConflict:            api.CallConflict,
		toolbelt.ResultGateRefused:         api.CallGateRefused,
		toolbelt.ResultParked:              api.CallParked,
		toolbelt.ResultError:               api.CallError,
		toolbelt.RecordGuidance:            api.RecordGuidance,
		toolbelt.RecordServing:             api.RecordServing,
		storage.ToolbeltCalled:             api.ToolbeltCalled,
		storage.ToolbeltRejected:           api.ToolbeltRejected,
		toolbeltapi.PathCall:               api.PathToolbeltCall,
		toolbeltapi.PathGuidance:           api.PathToolbeltGuidance,
		toolbeltapi.PathServing:            api.PathToolbeltServing,
		DefaultInputType:                   api.DefaultInputType,
		OwnerName:                          api.OwnerName,
		string(ClassOperator):              api.ClassOperator,
		string(ClassExecution):             api.ClassExecution,
		RoleView.String():                  api.RoleView,
		RoleOperate.String():               api.RoleOperate,
		RoleAdmin.String():                 api.RoleAdmin,
		fmt.Sprint(DefaultPageSize):        fmt.Sprint(api.DefaultPageSize),
		fmt.Sprint(MaxPageSize):            fmt.Sprint(api.MaxPageSize),
		string(storage.WorkCancelled):      api.WorkCancelled,
		string(storage.ExecutionStopping):  api.ExecutionStopping,
		string(storage.ResultLost):         api.ResultLost,
		string(storage.WaitTimedOut):       api.WaitTimedOut,
		string(kernel.EffectUnmatched):     api.EffectUnmatched,
		string(kernel.VerdictBypassed):     api.VerdictBypassed,
	}
	for server, wire := range same {
		if server != wire {
			t.Errorf("the server says %q where api says %q", server, wire)
		}
	}
}
