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
	ID string `json:"id"`
	// Digest is the SHA-256 of the token's text.
	Digest     []byte `json:"-"`
	Execution  string `json:"execution"`
	Scope      string `json:"scope"`
	Work       string `json:"work"`
	Binding    string `json:"binding"`
	Generation int64  `json:"generation"`
	Epoch      int64  `json:"epoch"`
	// Operations is the allowlist fixed at issue.
	Operations []string  `json:"operations"`
	IssuedAt   time.Time `json:"issued_at"`
	// ExpiresAt is exclusive: the token is expired at ExpiresAt.
	ExpiresAt time.Time `json:"expires_at"`
	// RevokedAt is zero while the token is not revoked.
	RevokedAt time.Time `json:"revoked_at,omitzero"`
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
	Execution string `json:"execution"`
	RequestID string `json:"request_id"`
	Operation string `json:"operation"`
	// InputHash is the hex SHA-256 of the canonical input.
	InputHash string      `json:"input_hash"`
	State     ReplayState `json:"state"`
	// Result is the committed result (ReplayDone, no ErrorCode).
	Result json.RawMessage `json:"result,omitempty"`
	// ErrorCode and ErrorMessage are a handler's committed refusal.
	ErrorCode    string `json:"error_code,omitempty"`
	ErrorMessage string `json:"error_message,omitempty"`
	// Withheld: the operation is sensitive (its result holds a
	// credential), so the record keeps no result and no refusal, only
	// what detects a changed body (Operation, InputHash). A repeat runs the
	// handler again instead of replaying. A withheld record never carries
	// Result, ErrorCode or ErrorMessage; the store refuses one that does.
	Withheld  bool      `json:"withheld,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Toolbelt call kinds.
const (
	ToolbeltCalled   = "toolbelt.called"
	ToolbeltRejected = "toolbelt.rejected"
)

// ToolbeltCall records one toolbelt request or refusal for the operator. It
// never holds a token, a digest, an input value or a secret.
type ToolbeltCall struct {
	ID string `json:"id"`
	// Kind is ToolbeltCalled or ToolbeltRejected.
	Kind string `json:"kind"`
	// Operation is the operation called ("" for an unreadable request;
	// guidance and serving reads are recorded as toolbelt.guidance and
	// toolbelt.serving).
	Operation string `json:"operation"`
	// Execution, Epoch and Token are known once the token was found.
	Execution string `json:"execution,omitempty"`
	Epoch     int64  `json:"epoch,omitempty"`
	Token     string `json:"token_id,omitempty"`
	// Result is toolbelt.result: ok, forbidden, authority_released,
	// request_conflict, invalid, gate_refused, parked, a handler's code…
	Result string `json:"result"`
	// Gate names the gate that parked or refused the call.
	Gate     string    `json:"gate,omitempty"`
	Replayed bool      `json:"replayed,omitempty"`
	At       time.Time `json:"at"`
}

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
	_, err := tx.RevokeTokens(ctx, &RevokeTokensParams{Execution: exe.ID, At: at})
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
}

// SweepToolbeltResult counts what a retention pass deleted.
type SweepToolbeltResult struct {
	Tokens  int `json:"tokens"`
	Replays int `json:"replays"`
	Calls   int `json:"calls"`
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
