package management

import (
	"encoding/base64"
	stdjson "encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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
	"github.com/open-conduit/open-conduit/internal/wire/wiretest"
)

// These tests pin the bodies of management's own conversions (wire.go),
// sent with the server's own encoder: each sample's body must equal the
// golden one in testdata/. The golden bodies were written while the tests
// still compared each conversion with the response struct the handlers
// sent before; storage records and the kernel's results are pinned the
// same way in package wire.

var wireTime = wiretest.Time

func TestWireActions(t *testing.T) {
	g := wiretest.NewGolden(t)
	for name, a := range map[string]toolbelt.ActionInfo{
		"filled": {Name: "acme.deploy", Registration: "acme", Summary: "Deploy a ref", InputSchema: stdjson.RawMessage(`{"properties":{"ref":{"type":"string"}},"type":"object"}`)},
		"zero":   {},
		"plain":  {Name: "acme.ping", Registration: "acme", InputSchema: stdjson.RawMessage(`{"type":"object"}`)},
	} {
		list := api.Page[toolbelt.ActionInfo]{Items: []toolbelt.ActionInfo{a}}
		g.Add("Page<Action> "+name, pageOut(list, actionOut))
	}
	g.Add("Page<Action> none", pageOut(api.Page[toolbelt.ActionInfo]{}, actionOut))
	ev := storage.Event{Seq: 9, ID: "evt_1", Type: "core.action", Source: "core.action", Scope: "setup", Work: "wrk_1",
		Data: stdjson.RawMessage(`{"action":"acme.deploy","input":{"ref":"main"}}`), Root: "evt_1", Actor: "operator:local",
		DeliveryID: "actions.act:0a1b", AcceptedAt: wireTime}
	replayed := ev
	replayed.Replayed = true
	for name, res := range map[string]toolbelt.ActResult{
		"filled":   {Event: ev, Result: stdjson.RawMessage(`{"deployed":"main"}`)},
		"replayed": {Event: replayed, Result: stdjson.RawMessage(`{}`)},
		"zero":     {},
	} {
		g.Add("Acted "+name, actedOut(res))
	}
}

func TestWireScopes(t *testing.T) {
	g := wiretest.NewGolden(t)
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
		g.Add("Scope "+name, scopeOut(sc, 4))
	}
	g.Add("Page<Sample>", api.Page[api.RouteSample]{Items: []api.RouteSample{}})
}

func TestWireOperators(t *testing.T) {
	g := wiretest.NewGolden(t)
	local := time.FixedZone("here", 3600)
	active := Credential{ID: "tok_1", Name: "alice", Role: RoleOperate, Digest: bearer.DigestOf("secret"), CreatedAt: wireTime.In(local)}
	revoked := Credential{ID: "tok_2", Name: OwnerName, Role: RoleAdmin, CreatedAt: wireTime, RevokedAt: wireTime.Add(time.Hour).In(local)}
	for name, c := range map[string]Credential{"active": active, "revoked": revoked} {
		g.Add("Operator "+name, operatorOut(c))
		g.Add("Issued "+name, issuedOut(Issued{Credential: c, Token: "the-token"}))
	}
	for _, class := range []Class{ClassOperator, ClassExecution} {
		r := RevokeResult{TokenID: "tok_1", Class: class, Revoked: true}
		g.Add("Revoked "+string(class), revokedOut(r))
	}
	g.Add("Revoked zero", revokedOut(RevokeResult{Class: ClassOperator}))
	g.Add("Health", healthOut("0.1.0", 3, "ready"))
	g.Add("Health zero", healthOut("", 0, ""))
	// No credential's digest reaches the listing.
	if b := wiretest.Marshal(t, operatorOut(active)); containsDigest(b, active.Digest) {
		t.Errorf("the operator listing shows a digest: %s", b)
	}
}

func containsDigest(body string, d Digest) bool {
	return strings.Contains(body, fmt.Sprintf("%x", d[:])) || strings.Contains(body, base64.StdEncoding.EncodeToString(d[:]))
}

func TestWireConfig(t *testing.T) {
	golden := wiretest.NewGolden(t)
	local := time.FixedZone("here", -7200)
	g := storage.Generation{Number: 3, Hash: "9f2c", Normalized: stdjson.RawMessage(`{"version":1,"secrets":{"gh":"env:<redacted>"}}`), Actor: "operator:local", CreatedAt: wireTime.In(local)}
	golden.Add("Config", configOut(g))

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
		golden.Add("Validation "+name, validationOut(c.snap, c.res))
	}
	for name, res := range map[string]configsvc.ApplyResult{
		"warnings":    {Generation: g, Previous: 2, Warnings: warns},
		"no warnings": {Generation: g, Previous: 2},
	} {
		golden.Add("Applied "+name, appliedOut(res))
	}
}

// TestWireEnvelope pins the envelope the one error writer
// (httpapi.Writer) sends, with the diagnostics configErr gives it.
func TestWireEnvelope(t *testing.T) {
	g := wiretest.NewGolden(t)
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
			e.Diagnostics = diagnosticsOut(c.diags)
		}
		httpapi.Writer{}.Error(rec, httptest.NewRequest("GET", "/v1/x", nil), e)
		g.Add("Envelope "+name, stdjson.RawMessage(strings.TrimSpace(rec.Body.String())))
	}
	// A refusal of the configuration service keeps its diagnostics.
	err := configErr(&configsvc.Refusal{Kind: configsvc.ErrInvalidConfig, Message: "does not validate", Diagnostics: diags})
	rec := httptest.NewRecorder()
	httpapi.Writer{}.Error(rec, httptest.NewRequest("POST", "/v1/config/apply", nil), err)
	g.Add("Envelope refusal", stdjson.RawMessage(strings.TrimSpace(rec.Body.String())))
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
		kernel.ErrScopeInactive.Code:       api.CodeScopeInactive,
		kernel.ErrBindingRequired.Code:     api.CodeBindingRequired,
		kernel.ErrUnknownBinding.Code:      api.CodeUnknownBinding,
		kernel.ErrUnknownGrant.Code:        api.CodeUnknownGrant,
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
