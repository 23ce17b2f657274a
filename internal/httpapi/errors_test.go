package httpapi

import (
	"errors"
	"fmt"
	"github.com/open-conduit/open-conduit/api"
	"net/http"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/kernel"
)

func TestClassify(t *testing.T) {
	cases := []struct {
		err    error
		status int
		code   string
	}{
		{extension.ErrUnauthorized, 401, "unauthorized"},
		{fmt.Errorf("wrapped: %w", extension.ErrAuthorityReleased), 403, "authority_released"},
		{extension.ErrForbidden, 403, "forbidden"},
		{ErrForbiddenRole, 403, "forbidden_role"},
		{ErrWrongCredentialClass, 403, "wrong_credential_class"},
		{fmt.Errorf("work wrk_1: %w", extension.ErrNotFound), 404, "not_found"},
		{ErrMethodNotAllowed, 405, "method_not_allowed"},
		{ErrIdempotencyConflict, 409, "idempotency_conflict"},
		{extension.ErrRequestConflict, 409, "request_conflict"},
		{extension.ErrConflict, 409, "conflict"},
		{fmt.Errorf("scope s: %w", ErrScopeInUse), 409, "scope_in_use"},
		{ErrStaleGeneration, 409, "stale_generation"},
		{ErrPayloadTooLarge, 413, "payload_too_large"},
		{ErrUnsupportedMediaType, 415, "unsupported_media_type"},
		{extension.ErrInvalid, 422, "invalid_request"},
		{ErrInvalidConfig, 422, "invalid_config"},
		{Errorf(CodeInvalidPackage, "the package does not check"), 422, "invalid_package"},
		{ErrInvalidCursor, 422, "invalid_cursor"},
		{ErrCursorMismatch, 422, "cursor_mismatch"},
		{ErrCursorExpired, 422, "cursor_expired"},
		{ErrIdempotencyKeyRequired, 400, "idempotency_key_required"},
		{Errorf(CodeRangeNotSatisfiable, "bytes 9-10 of 4"), 416, "range_not_satisfiable"},
		{fmt.Errorf("emit: %w", kernel.ErrCausalDepthExceeded), 422, "causal_depth_exceeded"},
		{kernel.ErrCausalRateExceeded, 429, "causal_rate_exceeded"},
		// The Work controls' refusals a caller acts on differently keep
		// their own codes; a manual Work's conflicting identity is the
		// idempotency conflict it is.
		{kernel.Refuse(extension.ErrConflict, kernel.ErrAttemptLive.Code, "execution e is running"), 409, "attempt_live"},
		{kernel.Refuse(extension.ErrConflict, kernel.ErrSystemHold.Code, "held attempt_lost"), 409, "system_hold"},
		{kernel.Refuse(extension.ErrConflict, kernel.ErrWorkConflict.Code, "another request"), 409, "idempotency_conflict"},
		{kernel.Refuse(extension.ErrConflict, kernel.ErrNotHeld.Code, "not held"), 409, "conflict"},
		// The rules of operator events and new Work (kernel.WorkBinding)
		// answer as the handlers that made them did.
		{kernel.Refuse(extension.ErrInvalid, kernel.ErrScopeInactive.Code, "scope x is not active"), 422, "invalid_request"},
		{kernel.Refuse(extension.ErrInvalid, kernel.ErrBindingRequired.Code, "name one"), 422, "invalid_request"},
		{kernel.Refuse(extension.ErrInvalid, kernel.ErrUnknownBinding.Code, "no binding b"), 422, "invalid_request"},
		{kernel.Refuse(extension.ErrInvalid, kernel.ErrUnknownGrant.Code, "no grant g"), 422, "invalid_request"},
		{kernel.Refuse(extension.ErrInvalid, kernel.ErrParentNotFound.Code, "no parent"), 422, "invalid_request"},
		{&extension.OperationError{Code: "github_rate_limited", Message: "try later"}, 422, "github_rate_limited"},
		{fmt.Errorf("gate: %w", &extension.GateRefusal{Gate: "human", Err: &extension.OperationError{Code: "denied", Message: "no"}}), 422, "denied"},
		{Errorf(CodeStaleGeneration, "generation 3 is active"), 409, "stale_generation"},
		{Errorf(Code("made_up"), "x"), 500, "internal"},
		{errors.New("sqlite: database is locked"), 500, "internal"},
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		status, code, msg, _ := classify(tc.err, false)
		if status != tc.status || code != tc.code {
			t.Errorf("classify(%v) = %d %s, want %d %s", tc.err, status, code, tc.status, tc.code)
		}
		if msg == "" {
			t.Errorf("classify(%v): empty message", tc.err)
		}
		if strings.Contains(msg, "sqlite") || strings.Contains(msg, "wrapped") {
			t.Errorf("classify(%v): message %q carries error text", tc.err, msg)
		}
		seen[code] = true
	}
	// Every code of the table is reachable.
	for c := range sent {
		if !seen[string(c)] {
			t.Errorf("code %s is not exercised", c)
		}
	}
}

// TestKernelErr: the toolbelt keeps a refusal of authority bare (the
// sentinel's generic message, never the runtime's precise reason), while an
// operator control names it; both keep a shape refusal's message.
func TestKernelErr(t *testing.T) {
	stale := &kernel.Error{Code: kernel.ErrStaleEpoch.Code, Kind: kernel.ErrStaleEpoch.Kind, Message: "epoch 1 of execution exe_1 is not the live one"}
	for _, bare := range []bool{true, false} {
		_, code, msg, _ := classify(stale, bare)
		if code != "forbidden" {
			t.Fatalf("bare=%v: code %s, want forbidden", bare, code)
		}
		if got := strings.Contains(msg, "exe_1"); got == bare {
			t.Fatalf("bare=%v: message %q", bare, msg)
		}
	}
	bad := &kernel.Error{Code: kernel.ErrInvalidEvent.Code, Kind: kernel.ErrInvalidEvent.Kind, Message: "type must be namespaced"}
	for _, bare := range []bool{true, false} {
		if _, code, msg, _ := classify(bad, bare); code != "invalid_request" || msg != bad.Message {
			t.Fatalf("bare=%v: %s %q", bare, code, msg)
		}
	}
}

// Every code the server sends has its status in the api package's one
// table, and Status answers it; a code outside the set is a 500.
func TestEveryCodeSentHasItsWireStatus(t *testing.T) {
	for code := range sent {
		want, ok := api.Status(string(code))
		if !ok {
			t.Errorf("the server sends %s, which api.Status does not know", code)
		}
		if got := code.Status(); got != want {
			t.Errorf("%s.Status() = %d, api.Status says %d", code, got, want)
		}
	}
	if got := Code("no_such_code").Status(); got != http.StatusInternalServerError {
		t.Errorf("an unknown code's status = %d, want 500", got)
	}
}
