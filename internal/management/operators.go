package management

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/bearer"
	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/httpapi"
	"github.com/open-conduit/open-conduit/internal/ids"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/statedir"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// Credential is an operator credential as it is stored: digest-only.
type Credential struct {
	// ID is the revocation id (tok_…).
	ID string
	// Name is the operator's name; the owner's is OwnerName.
	Name string
	Role Role
	// Digest is the SHA-256 of the token; the token itself is never
	// stored.
	Digest    Digest
	CreatedAt time.Time
	// RevokedAt is zero while the credential is active.
	RevokedAt time.Time
}

// Active reports whether the credential is not revoked.
func (c Credential) Active() bool { return c.RevokedAt.IsZero() }

// Credentials stores operator credentials. Every lookup of an unknown
// credential returns an error wrapping extension.ErrNotFound.
type Credentials interface {
	// Insert stores a new credential. It returns an error wrapping
	// extension.ErrConflict if its name already has an active credential
	// (one active credential per name) or its id or digest exists.
	Insert(ctx context.Context, c Credential) error
	// ByDigest returns the credential, active or revoked, with digest d.
	ByDigest(ctx context.Context, d Digest) (Credential, error)
	// ByID returns the credential, active or revoked, with this id.
	ByID(ctx context.Context, id string) (Credential, error)
	// Revoke marks the credential revoked at the given time. Revoking a
	// revoked credential succeeds and keeps the first time. A store that
	// revokes in a coordination-storage transaction runs, as its last
	// step, the recorder ctx carries (kernel.RecordResult) with the id
	// it revoked, so that the request's Idempotency-Key record commits
	// with the revocation (revokeContext).
	Revoke(ctx context.Context, id string, at time.Time) error
	// RevokeAndInsert revokes the credential id and inserts next in one
	// transaction. If id is not an active credential it changes nothing
	// and returns an error wrapping extension.ErrNotFound (unknown) or
	// extension.ErrConflict (already revoked).
	RevokeAndInsert(ctx context.Context, id string, at time.Time, next Credential) error
	// ListOperators returns the credentials, active and revoked (only the
	// active ones with p.Active), in the keyset window p.Page on
	// (created_at, id), as every list is paged.
	ListOperators(ctx context.Context, p *storage.ListCredentialsParams) ([]Credential, error)
	// ActiveByName returns the active credential of name.
	ActiveByName(ctx context.Context, name string) (Credential, error)
}

var operatorName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)

// CheckOperatorName checks a named operator's name: a lower-case letter
// followed by up to 31 lower-case letters, digits or '-', and not the
// owner's name.
func CheckOperatorName(name string) error {
	if name == OwnerName {
		return httpapi.Wrap(httpapi.CodeInvalidRequest, extension.ErrInvalid, `"local" is the state directory owner's name; choose another name`)
	}
	if !operatorName.MatchString(name) {
		return httpapi.Wrap(httpapi.CodeInvalidRequest, extension.ErrInvalid, "an operator name is a lower-case letter followed by up to 31 lower-case letters, digits or '-'")
	}
	return nil
}

// Issued is a credential together with its token, returned exactly once.
type Issued struct {
	Credential Credential
	Token      string
}

// Operators issues, rotates and revokes operator credentials over a
// Credentials store, with injected time and randomness.
type Operators struct {
	store Credentials
	clock clock.Clock
	ids   *ids.Generator

	mu      sync.Mutex // guards entropy
	entropy io.Reader
}

// NewOperators returns the credential service over store; the clock and
// the entropy source are required.
func NewOperators(store Credentials, c clock.Clock, entropy clock.Entropy) (*Operators, error) {
	switch {
	case c == nil:
		return nil, errors.New("management: the operator credentials need a Clock")
	case entropy == nil:
		return nil, errors.New("management: the operator credentials need an Entropy source")
	}
	return &Operators{store: store, clock: c, entropy: entropy, ids: ids.NewGenerator(c, entropy)}, nil
}

// Store returns the credential store.
func (o *Operators) Store() Credentials { return o.store }

// newToken draws a token: unpadded base64url of 32 random bytes.
func (o *Operators) newToken() (string, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	tok, err := bearer.New(o.entropy)
	if err != nil {
		return "", fmt.Errorf("management: entropy for a token: %w", err)
	}
	return tok, nil
}

func (o *Operators) mint(name string, role Role) (Issued, error) {
	tok, err := o.newToken()
	if err != nil {
		return Issued{}, err
	}
	o.mu.Lock()
	id := o.ids.New(ids.Token)
	o.mu.Unlock()
	c := Credential{ID: id, Name: name, Role: role, Digest: bearer.DigestOf(tok), CreatedAt: o.clock.Now()}
	return Issued{Credential: c, Token: tok}, nil
}

// Issue creates a named operator's credential. A zero role means view.
// A name that already has an active credential is refused with conflict.
func (o *Operators) Issue(ctx context.Context, name string, role Role) (Issued, error) {
	if err := CheckOperatorName(name); err != nil {
		return Issued{}, err
	}
	if role == 0 {
		role = RoleView
	}
	if !role.Valid() {
		return Issued{}, httpapi.Wrap(httpapi.CodeInvalidRequest, extension.ErrInvalid, "role must be view, operate or admin")
	}
	if active, err := o.store.ActiveByName(ctx, name); err == nil {
		return Issued{}, httpapi.Wrap(httpapi.CodeConflict, extension.ErrConflict,
			fmt.Sprintf("operator %s already has an active credential (%s); revoke it first with: open-conduit auth revoke %s", name, active.ID, active.ID))
	} else if !errors.Is(err, extension.ErrNotFound) {
		return Issued{}, err
	}
	is, err := o.mint(name, role)
	if err != nil {
		return Issued{}, err
	}
	if err := o.store.Insert(ctx, is.Credential); err != nil {
		if errors.Is(err, extension.ErrConflict) {
			return Issued{}, httpapi.Wrap(httpapi.CodeConflict, err, fmt.Sprintf("operator %s already has an active credential; revoke it first", name))
		}
		return Issued{}, err
	}
	return is, nil
}

// Rotate revokes the caller's credential and issues a replacement with
// the same name and role, in one transaction.
func (o *Operators) Rotate(ctx context.Context, p Principal) (Issued, error) {
	if p.Class != ClassOperator || p.TokenID == "" {
		return Issued{}, httpapi.Wrap(httpapi.CodeUnauthorized, extension.ErrUnauthorized, "only an operator credential can be rotated")
	}
	role := p.Role
	if p.IsOwner() {
		role = RoleAdmin
	}
	is, err := o.mint(p.Name, role)
	if err != nil {
		return Issued{}, err
	}
	if err := o.store.RevokeAndInsert(ctx, p.TokenID, o.clock.Now(), is.Credential); err != nil {
		if errors.Is(err, extension.ErrConflict) || errors.Is(err, extension.ErrNotFound) {
			return Issued{}, httpapi.Wrap(httpapi.CodeUnauthorized, extension.ErrUnauthorized, "this credential was revoked before it could be rotated")
		}
		return Issued{}, err
	}
	return is, nil
}

// RevokeResult says what a revocation revoked.
type RevokeResult struct {
	TokenID string
	Class   Class
	Revoked bool
}

// Revoke revokes the credential or execution token with this id on
// behalf of p: any execution token; p's own credential; for an admin, any
// named operator's. The owner's credential is revoked only by the owner
// (or by RecoverOperator).
func (o *Operators) Revoke(ctx context.Context, p Principal, id string, exec ExecutionTokens) (RevokeResult, error) {
	if id == "" {
		return RevokeResult{}, httpapi.Errorf(httpapi.CodeInvalidRequest, "token_id is required")
	}
	c, err := o.store.ByID(ctx, id)
	switch {
	case err == nil:
		self := c.ID == p.TokenID
		if !self && c.Name == OwnerName {
			return RevokeResult{}, httpapi.Wrap(httpapi.CodeForbidden, extension.ErrForbidden,
				"the owner's credential can be revoked only by the owner, or on the host with the daemon stopped: open-conduit auth recover")
		}
		if !self && p.Role != RoleAdmin {
			return RevokeResult{}, httpapi.Wrap(httpapi.CodeForbiddenRole, httpapi.ErrForbiddenRole,
				fmt.Sprintf("revoking another operator's credential needs the admin role; this credential's role is %s", p.Role))
		}
		res := RevokeResult{TokenID: id, Class: ClassOperator, Revoked: true}
		if err := o.store.Revoke(revokeContext(ctx, res), id, o.clock.Now()); err != nil {
			return RevokeResult{}, err
		}
		return res, nil
	case !errors.Is(err, extension.ErrNotFound):
		return RevokeResult{}, err
	}
	notFound := httpapi.Wrap(httpapi.CodeNotFound, extension.ErrNotFound, fmt.Sprintf("no credential or execution token has id %s; list operator credentials with: open-conduit auth operators (--all to include revoked ones)", httpapi.Clip(id)))
	if exec == nil {
		return RevokeResult{}, notFound
	}
	res := RevokeResult{TokenID: id, Class: ClassExecution, Revoked: true}
	if err := exec.Revoke(revokeContext(ctx, res), id, o.clock.Now()); err != nil {
		if errors.Is(err, extension.ErrNotFound) {
			return RevokeResult{}, notFound
		}
		return RevokeResult{}, err
	}
	return res, nil
}

// revokeContext returns ctx for the store's revoke of res.TokenID. The
// store's transaction tells its recorder only the id it revoked (it knows
// nothing of the response); this one tells the recorder ctx carries, if
// any, res, the result Revoke returns, in that same transaction, so the
// Idempotency-Key record of POST /v1/auth/revoke commits with the
// revocation.
func revokeContext(ctx context.Context, res RevokeResult) context.Context {
	return kernel.WithResultRecorder(ctx, func(_ context.Context, tx storage.Tx, v any) error {
		if id, ok := v.(string); !ok || id != res.TokenID {
			return nil
		}
		return kernel.RecordResult(ctx, tx, res)
	})
}

// BootstrapState says what BootstrapOperator found or did.
type BootstrapState string

const (
	// BootstrapCreated: the owner had no active credential; one was
	// issued and its token written to the token file.
	BootstrapCreated BootstrapState = "created"
	// BootstrapReady: the token file holds the owner's active credential.
	BootstrapReady BootstrapState = "ready"
	// BootstrapStale: the owner has an active credential, but the token
	// file is missing or holds another token (a rotation response was
	// lost). Nothing was changed; RecoverOperator fixes it.
	BootstrapStale BootstrapState = "stale"
)

// BootstrapOperator makes sure, under the state directory's lock, that
// the owner (local, always admin) has a credential whose token is in
// <state>/private/operator.token (0600, in private/ 0700). It looks only
// at the owner's credential: a named operator's never stands in for it.
// If the owner has no active credential, it issues one and writes the
// file; if it has one that the file does not hold, it reports
// BootstrapStale and changes nothing.
func BootstrapOperator(ctx context.Context, lock *statedir.Lock, ops *Operators) (BootstrapState, error) {
	if !lock.Held() {
		return "", errors.New("management: BootstrapOperator needs the state directory's lock")
	}
	if err := statedir.EnsurePrivateSubdir(filepath.Join(lock.StateDir(), statedir.PrivateDir)); err != nil {
		return "", err
	}
	path := statedir.OwnerTokenPath(lock.StateDir())
	active, err := ops.store.ActiveByName(ctx, OwnerName)
	if errors.Is(err, extension.ErrNotFound) {
		if err := ops.issueOwner(ctx, path, ""); err != nil {
			return "", err
		}
		return BootstrapCreated, nil
	}
	if err != nil {
		return "", err
	}
	tok, err := statedir.ReadTokenFile(path)
	if err != nil {
		return BootstrapStale, nil
	}
	d := bearer.DigestOf(tok)
	if subtle.ConstantTimeCompare(d[:], active.Digest[:]) != 1 {
		return BootstrapStale, nil
	}
	return BootstrapReady, nil
}

// RecoverOperator is the owner's way back after a lost rotation
// response: under the state directory's lock (so only with the daemon
// stopped), it revokes the owner's active credential and writes a fresh
// one to <state>/private/operator.token. Named operators are untouched.
func RecoverOperator(ctx context.Context, lock *statedir.Lock, ops *Operators) error {
	if !lock.Held() {
		return errors.New("management: RecoverOperator needs the state directory's lock")
	}
	if err := statedir.EnsurePrivateSubdir(filepath.Join(lock.StateDir(), statedir.PrivateDir)); err != nil {
		return err
	}
	oldID := ""
	active, err := ops.store.ActiveByName(ctx, OwnerName)
	switch {
	case err == nil:
		oldID = active.ID
	case !errors.Is(err, extension.ErrNotFound):
		return err
	}
	return ops.issueOwner(ctx, statedir.OwnerTokenPath(lock.StateDir()), oldID)
}

// issueOwner writes a fresh owner token to path, then stores its
// credential, revoking oldID in the same transaction if it is set. The
// file is written first: a crash in between leaves a token nobody can use
// rather than a credential whose token is lost.
func (o *Operators) issueOwner(ctx context.Context, path, oldID string) error {
	is, err := o.mint(OwnerName, RoleAdmin)
	if err != nil {
		return err
	}
	if err := statedir.WriteTokenFile(path, is.Token); err != nil {
		return err
	}
	if oldID == "" {
		return o.store.Insert(ctx, is.Credential)
	}
	return o.store.RevokeAndInsert(ctx, oldID, o.clock.Now(), is.Credential)
}

// IssueRequest is the body of POST /v1/auth/operators.
type IssueRequest struct {
	Name string `json:"name"`
	Role Role   `json:"role"`
}

// RevokeRequest is the body of POST /v1/auth/revoke.
type RevokeRequest struct {
	TokenID string `json:"token_id"`
}

func (s *Server) handleIssueOperator(r *http.Request) (any, error) {
	var req IssueRequest
	if err := httpapi.DecodeBody(r, &req); err != nil {
		return nil, err
	}
	is, err := s.ops.Issue(r.Context(), req.Name, req.Role)
	if err != nil {
		return nil, err
	}
	return &httpapi.Response{Status: http.StatusCreated, Body: issuedOut(is)}, nil
}

// operatorFilters are the filters of GET /v1/auth/operators, bound into
// its cursors: a cursor of the active listing does not page the full one.
type operatorFilters struct {
	All bool `json:"all"`
}

// handleListOperators serves GET /v1/auth/operators: the active
// credentials, or with all=true every credential, active and revoked,
// oldest first, paged on (created_at, id) with the listing's last
// credential captured as the upper bound, like the resource lists.
func (s *Server) handleListOperators(r *http.Request) (any, error) {
	q, limit, cursor, err := listQuery(r, "all")
	if err != nil {
		return nil, err
	}
	var f operatorFilters
	switch q.Get("all") {
	case "", "false":
	case "true":
		f.All = true
	default:
		return nil, httpapi.Errorf(httpapi.CodeInvalidRequest, "all must be true or false")
	}
	ctx := r.Context()
	creds, err := pageByCreated(s.cursors, r, f, limit, cursor,
		func(p storage.Page) ([]Credential, error) {
			return s.ops.store.ListOperators(ctx, &storage.ListCredentialsParams{Active: !f.All, Page: p})
		},
		func(c Credential) storage.Position { return storage.Position{CreatedAt: c.CreatedAt, ID: c.ID} })
	if err != nil {
		return nil, err
	}
	return pageOut(creds, operatorOut), nil
}

func (s *Server) handleRotate(r *http.Request) (any, error) {
	var req struct{}
	if err := httpapi.DecodeBody(r, &req); err != nil {
		return nil, err
	}
	p, _ := PrincipalFrom(r.Context())
	is, err := s.ops.Rotate(r.Context(), p)
	if err != nil {
		return nil, err
	}
	return issuedOut(is), nil
}

func (s *Server) handleRevoke(r *http.Request) (any, error) {
	var req RevokeRequest
	if err := httpapi.DecodeBody(r, &req); err != nil {
		return nil, err
	}
	p, _ := PrincipalFrom(r.Context())
	ctx := recordInTx(r.Context(), r, func(v any) (any, bool) {
		res, ok := v.(RevokeResult)
		return revokedOut(res), ok
	})
	res, err := s.ops.Revoke(ctx, p, req.TokenID, s.opts.ExecutionTokens)
	if err != nil {
		return nil, err
	}
	return revokedOut(res), nil
}
