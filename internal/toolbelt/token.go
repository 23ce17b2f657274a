package toolbelt

import (
	"context"
	"time"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// TokenRequest asks for a fresh execution token for one epoch of an
// execution. It is defined here, below the scheduler, so that the toolbelt
// (in this package) can implement TokenIssuer and the scheduler can call it
// without an import cycle.
type TokenRequest struct {
	ExecutionID string
	WorkID      string
	ScopeID     string
	BindingID   string
	// Generation is the configuration generation the attempt is pinned to.
	Generation int64
	// Epoch is the epoch the token is bound to; issuing it revokes every
	// token of a lower epoch of the execution.
	Epoch int64
	// Grants are the binding grants the Work took.
	Grants []string
	// ExpiresAt is the attempt deadline: the token never outlives it.
	ExpiresAt time.Time
	// Reason is claim, recover or resume.
	Reason string
}

// TokenIssuer issues execution tokens. The scheduler calls it after every
// claim, recovery and resume of an executor whose transport is not none;
// the plaintext it returns goes to the endpoints callback and the executor,
// never to storage.
type TokenIssuer interface {
	Issue(ctx context.Context, req TokenRequest) (string, error)
}

// TxTokenIssuer is a TokenIssuer that can also issue inside the caller's
// write transaction: the scheduler issues a claimed attempt's token in the
// claim's own transaction, so the token exists exactly when the claim
// commits. The execution must be visible in tx at the request's epoch.
type TxTokenIssuer interface {
	TokenIssuer
	IssueInTx(ctx context.Context, tx storage.Tx, req TokenRequest) (string, error)
}
