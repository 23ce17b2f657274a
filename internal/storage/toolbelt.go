package storage

import (
	"context"
	"encoding/json"
	"time"
)

// Token is an execution token as it is stored: the SHA-256 digest of its
// plaintext (never the plaintext), its revocation id and the authority it
// is pinned to.
type Token struct {
	// ID is the revocation id (tok_…).
	ID string
	// Digest is the SHA-256 of the token's text.
	Digest     []byte
	Execution  string
	Scope      string
	Work       string
	Binding    string
	Generation int64
	Epoch      int64
	// Operations is the allowlist fixed at issue.
	Operations []string
	IssuedAt   time.Time
	// ExpiresAt is exclusive: the token is expired at ExpiresAt.
	ExpiresAt time.Time
	// RevokedAt is zero while the token is not revoked.
	RevokedAt time.Time
}

// Revoked reports whether the token was revoked.
func (t Token) Revoked() bool { return !t.RevokedAt.IsZero() }

// ReplayState is the state of a toolbelt request record.
type ReplayState string

const (
	// ReplayClaimed: an extension handler was started for the request and
	// its result is not recorded yet.
	ReplayClaimed ReplayState = "claimed"
	// ReplayDone: the request's result is committed.
	ReplayDone ReplayState = "done"
)

// Replay is the record of one toolbelt request of one execution, keyed by
// (Execution, RequestID): it lets a repeat replay the committed result and
// refuses a changed body.
type Replay struct {
	Execution string
	RequestID string
	Operation string
	// InputHash is the hex SHA-256 of the canonical input.
	InputHash string
	State     ReplayState
	// Result is the committed result (ReplayDone, no ErrorCode).
	Result json.RawMessage
	// ErrorCode and ErrorMessage are a handler's committed refusal.
	ErrorCode    string
	ErrorMessage string
	// Withheld: the operation is sensitive (its result holds a
	// credential), so the record keeps no result and no refusal, only
	// what detects a changed body (Operation, InputHash). A repeat runs the
	// handler again instead of replaying. A withheld record never carries
	// Result, ErrorCode or ErrorMessage; the store refuses one that does.
	Withheld  bool
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Toolbelt call kinds.
const (
	ToolbeltCalled   = "toolbelt.called"
	ToolbeltRejected = "toolbelt.rejected"
)

// ToolbeltCall records one toolbelt request or refusal for the operator. It
// never holds a token, a digest, an input value or a secret.
type ToolbeltCall struct {
	ID string
	// Kind is ToolbeltCalled or ToolbeltRejected.
	Kind string
	// Operation is the operation called ("" for an unreadable request;
	// guidance and serving reads are recorded as toolbelt.guidance and
	// toolbelt.serving).
	Operation string
	// Execution, Epoch and Token are known once the token was found.
	Execution string
	Epoch     int64
	Token     string
	// Result is toolbelt.result: ok, forbidden, authority_released,
	// request_conflict, invalid, gate_refused, parked, a handler's code…
	Result string
	// Gate names the gate that parked or refused the call.
	Gate string
	// Refusal is toolbelt.refusal, the classification of a refused call:
	// RefusalConfigDrift or "".
	Refusal  string
	Replayed bool
	At       time.Time
}

// RefusalConfigDrift is toolbelt.refusal of a call refused although the
// binding's playbook declares its operation in the generation the
// execution is pinned to: the configuration changed under the playbook.
const RefusalConfigDrift = "config_drift"

// ListToolbeltCallsParams filters call records, ordered by (at, id).
type ListToolbeltCallsParams struct {
	Execution string
	Kind      string
	Result    string
	Page
}

// RevokeTokensParams revokes tokens that are not revoked yet: the token ID,
// or, with Execution, every token of the execution (below BelowEpoch when
// it is non-zero).
type RevokeTokensParams struct {
	ID         string
	Execution  string
	BelowEpoch int64
	At         time.Time
	// Uncounted says the caller does not need the count: the store may
	// send the revocation with the transaction's next statement (it
	// returns 0 then), and its error is that statement's or the
	// commit's. The revocation commits with the transaction either way.
	Uncounted bool
}

// RevokeFinishedTokens revokes, inside tx, every token of exe not revoked
// yet when exe has finished, and does nothing while it is live. Every
// transaction that finishes an execution calls it with the execution its
// UpdateExecution returned, so that no token outlives its execution,
// whatever became of the execution's run directory.
func RevokeFinishedTokens(ctx context.Context, tx Tx, exe Execution, at time.Time) error {
	if exe.Live() {
		return nil
	}
	_, err := tx.RevokeTokens(ctx, &RevokeTokensParams{Execution: exe.ID, At: at, Uncounted: true})
	return err
}

// SweepToolbeltParams bounds a retention pass: tokens revoked or expired
// at or before TokensBefore, and request records written at or before
// ReplaysBefore whose execution finished, are deleted.
type SweepToolbeltParams struct {
	TokensBefore  time.Time
	ReplaysBefore time.Time
	// CallsBefore, when non-zero, deletes call records at or before it.
	CallsBefore time.Time
	// EgressBefore, when non-zero, deletes the egress proxy's connection
	// records that ended at or before it (a refused one ended when it
	// started); a connection still open is kept.
	EgressBefore time.Time
}

// SweepToolbeltResult counts what a retention pass deleted.
type SweepToolbeltResult struct {
	Tokens  int
	Replays int
	Calls   int
	Egress  int
}

// ToolbeltReader holds the toolbelt's queries.
type ToolbeltReader interface {
	// GetTokenByDigest returns the token with this digest, or ErrNotFound.
	GetTokenByDigest(ctx context.Context, digest []byte) (Token, error)
	GetToken(ctx context.Context, id string) (Token, error)
	// ListExecutionTokens lists an execution's tokens by epoch, then id.
	ListExecutionTokens(ctx context.Context, executionID string) ([]Token, error)
	GetReplay(ctx context.Context, executionID, requestID string) (Replay, error)
	ListToolbeltCalls(ctx context.Context, p *ListToolbeltCallsParams) ([]ToolbeltCall, error)
}

// ToolbeltTx holds the toolbelt's writes.
type ToolbeltTx interface {
	// InsertToken stores a token; ErrDuplicate when its id or digest exists.
	InsertToken(ctx context.Context, t *Token) error
	// RevokeTokens revokes what p selects and returns how many.
	RevokeTokens(ctx context.Context, p *RevokeTokensParams) (int, error)
	// InsertReplay claims a request; ErrDuplicate when it is recorded.
	InsertReplay(ctx context.Context, r *Replay) error
	// FinishReplay records a claimed request's result (state done), or
	// with Withheld marks it done with no result; ErrFenced when it is not
	// claimed.
	FinishReplay(ctx context.Context, r *Replay) error
	// DeleteReplay drops a claimed request whose handler did not run to a
	// result (a gate refused it); a done record is kept (ErrFenced).
	DeleteReplay(ctx context.Context, executionID, requestID string) error
	InsertToolbeltCall(ctx context.Context, c *ToolbeltCall) error
	// SweepToolbelt deletes what p says has passed its retention.
	SweepToolbelt(ctx context.Context, p *SweepToolbeltParams) (SweepToolbeltResult, error)
}
