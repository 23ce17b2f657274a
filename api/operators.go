package api

import "time"

// Operator roles, ordered: view < operate < admin.
const (
	RoleView    = "view"
	RoleOperate = "operate"
	RoleAdmin   = "admin"
)

// Credential classes, as Revoked.Class names them.
const (
	// ClassOperator: an operator's credential, for the management socket.
	ClassOperator = "operator"
	// ClassExecution: an execution's toolbelt token, for its own toolbelt
	// socket only.
	ClassExecution = "execution"
)

// OwnerName is the operator name of the state directory's owner.
const OwnerName = "local"

// Operator is one credential in GET /v1/auth/operators: never a token or
// a digest.
type Operator struct {
	Name string `json:"name"`
	// Role is view, operate or admin.
	Role    string `json:"role"`
	TokenID string `json:"token_id"`
	// Owner is true for the state directory owner's credential (local).
	Owner     bool      `json:"owner"`
	Active    bool      `json:"active"`
	CreatedAt time.Time `json:"created_at"`
	// RevokedAt is nil (absent) while the credential is active.
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// IssueRequest is the body of POST /v1/auth/operators. Role is view when
// left out.
type IssueRequest struct {
	Name string `json:"name"`
	Role string `json:"role,omitempty"`
}

// Issued is the body that returns a token, once: POST /v1/auth/operators
// (201) and POST /v1/auth/rotate (200). It is never stored in idempotency
// history, and Token is the only place the token ever appears.
type Issued struct {
	Name      string    `json:"name"`
	Role      string    `json:"role"`
	TokenID   string    `json:"token_id"`
	Token     string    `json:"token"`
	CreatedAt time.Time `json:"created_at"`
}

// RevokeRequest is the body of POST /v1/auth/revoke.
type RevokeRequest struct {
	TokenID string `json:"token_id"`
}

// Revoked is the body of POST /v1/auth/revoke.
type Revoked struct {
	TokenID string `json:"token_id"`
	// Class is ClassOperator or ClassExecution.
	Class   string `json:"class"`
	Revoked bool   `json:"revoked"`
}
