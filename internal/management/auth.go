package management

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/bearer"
	"github.com/open-conduit/open-conduit/internal/httpapi"
)

// Role is what an operator credential may do. Roles are ordered: view <
// operate < admin. The zero Role is no role at all and allows nothing.
type Role int

const (
	RoleView    Role = 1
	RoleOperate Role = 2
	RoleAdmin   Role = 3
)

var roleNames = map[Role]string{RoleView: "view", RoleOperate: "operate", RoleAdmin: "admin"}

// String returns the role's name, or "none" for the zero Role.
func (r Role) String() string {
	if n, ok := roleNames[r]; ok {
		return n
	}
	return "none"
}

// Valid reports whether r is one of the three roles.
func (r Role) Valid() bool { _, ok := roleNames[r]; return ok }

// Allows reports whether a credential with role r may use a route that
// needs role need.
func (r Role) Allows(need Role) bool { return r.Valid() && need.Valid() && r >= need }

// ParseRole parses "view", "operate" or "admin".
func ParseRole(s string) (Role, error) {
	for r, n := range roleNames {
		if n == s {
			return r, nil
		}
	}
	return 0, httpapi.Wrap(httpapi.CodeInvalidRequest, extension.ErrInvalid, "role must be view, operate or admin")
}

// MarshalText encodes the role as its name.
func (r Role) MarshalText() ([]byte, error) {
	if !r.Valid() {
		return nil, errors.New("management: cannot encode an unset role")
	}
	return []byte(r.String()), nil
}

// UnmarshalText decodes a role name.
func (r *Role) UnmarshalText(b []byte) error {
	v, err := ParseRole(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// Class is the kind of credential a bearer token is.
type Class string

const (
	// ClassOperator: an operator's credential, for the management socket.
	ClassOperator Class = "operator"
	// ClassExecution: an execution's toolbelt token, for its own
	// toolbelt socket only.
	ClassExecution Class = "execution"
)

// OwnerName is the name of the state directory's owner, whose credential
// lives in <state>/private/operator.token and is always admin.
const OwnerName = "local"

// Principal is who is calling, as authentication established it.
type Principal struct {
	Class Class
	// Name is the operator's name (ClassOperator).
	Name string
	// Role is the operator's role (ClassOperator).
	Role Role
	// TokenID is the credential's revocation id (tok_…).
	TokenID string
	// ExecutionID is the execution a ClassExecution token belongs to.
	ExecutionID string
}

// Actor is the principal as it is recorded on Events and actions:
// operator:<name> for an operator, execution:<id> for an execution.
func (p Principal) Actor() string {
	if p.Class == ClassExecution {
		return "execution:" + p.ExecutionID
	}
	return "operator:" + p.Name
}

// IsOwner reports whether p is the state directory's owner.
func (p Principal) IsOwner() bool { return p.Class == ClassOperator && p.Name == OwnerName }

type principalKey struct{}

// WithPrincipal returns ctx carrying p. The server sets it on every
// authenticated request; the daemon bridges it to the runtime's actor.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the authenticated principal on ctx.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// Digest is the SHA-256 of a token's text (bearer.DigestOf). Only digests
// are stored.
type Digest = bearer.Digest

// ExecutionToken is what the management server needs to know of an
// execution's toolbelt token: enough to refuse it with
// wrong_credential_class and to revoke it by id.
type ExecutionToken struct {
	ID          string
	ExecutionID string
	ExpiresAt   time.Time // zero: no expiry of its own
	RevokedAt   time.Time // zero: not revoked
}

// ExecutionTokens is the toolbelt's token store, as the management server
// sees it. Both methods return an error wrapping extension.ErrNotFound for
// an unknown token.
type ExecutionTokens interface {
	ByDigest(ctx context.Context, d Digest) (ExecutionToken, error)
	// Revoke revokes the token with this id at the given time. Revoking a
	// revoked token succeeds and keeps the first revocation time. Like
	// Credentials.Revoke, a store that revokes in a coordination-storage
	// transaction runs the recorder ctx carries (kernel.RecordResult)
	// with the id as that transaction's last step.
	Revoke(ctx context.Context, id string, at time.Time) error
}

// authenticate turns the request's bearer token into a principal. Every
// failure is extension.ErrUnauthorized, except a live execution token,
// which is ErrWrongCredentialClass: it is genuine, but not for this socket.
func (s *Server) authenticate(r *http.Request) (Principal, error) {
	token, present := httpapi.BearerToken(r)
	if !present {
		return Principal{}, httpapi.Wrap(httpapi.CodeUnauthorized, extension.ErrUnauthorized,
			"a bearer token is required: send Authorization: Bearer <token> with an operator token")
	}
	if !bearer.WellFormed(token) {
		return Principal{}, httpapi.Wrap(httpapi.CodeUnauthorized, extension.ErrUnauthorized,
			"the bearer token is malformed; use the token exactly as it was issued")
	}
	d := bearer.DigestOf(token)
	ctx := r.Context()
	c, err := s.opts.Credentials.ByDigest(ctx, d)
	switch {
	case err == nil && c.Active():
		return Principal{Class: ClassOperator, Name: c.Name, Role: c.Role, TokenID: c.ID}, nil
	case err != nil && !errors.Is(err, extension.ErrNotFound):
		return Principal{}, err
	}
	if s.opts.ExecutionTokens != nil && err != nil {
		t, terr := s.opts.ExecutionTokens.ByDigest(ctx, d)
		switch {
		case terr == nil && t.RevokedAt.IsZero() && (t.ExpiresAt.IsZero() || s.now().Before(t.ExpiresAt)):
			return Principal{}, httpapi.Wrap(httpapi.CodeWrongCredentialClass, httpapi.ErrWrongCredentialClass,
				"this is an execution token; the management socket accepts only operator tokens (an execution calls the toolbelt on its own socket)")
		case terr != nil && !errors.Is(terr, extension.ErrNotFound):
			return Principal{}, terr
		}
	}
	return Principal{}, httpapi.Wrap(httpapi.CodeUnauthorized, extension.ErrUnauthorized,
		"the bearer token is not valid: it is unknown, rotated or revoked; use a current operator token")
}
