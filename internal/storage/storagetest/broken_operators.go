package storagetest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// Controls of the operators area: operator credentials.

var dropsCredentialRole = txControl("drops_credential_role", "a credential is stored without its role",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return dropsRoleTx{tx} })

type dropsRoleTx struct{ storage.Tx }

func (t dropsRoleTx) InsertCredential(ctx context.Context, c *storage.Credential) error {
	d := *c
	d.Role = ""
	return t.Tx.InsertCredential(ctx, &d)
}

var swallowsDuplicateCredentials = txControl("swallows_duplicate_credentials", "InsertCredential of a taken id, digest or active name reports success",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return swallowsCredentialsTx{tx} })

type swallowsCredentialsTx struct{ storage.Tx }

func (t swallowsCredentialsTx) InsertCredential(ctx context.Context, c *storage.Credential) error {
	if err := t.Tx.InsertCredential(ctx, c); !errors.Is(err, storage.ErrDuplicate) {
		return err
	}
	return nil
}

var refusesSecondRevocation = txControl("refuses_second_revocation", "revoking a revoked credential fails instead of keeping the first revocation",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return revokesOnceTx{tx} })

type revokesOnceTx struct{ storage.Tx }

func (t revokesOnceTx) RevokeCredential(ctx context.Context, id string, at time.Time) error {
	if c, err := t.GetCredential(ctx, id); err == nil && !c.Active() {
		return fmt.Errorf("%w: credential %s is revoked", storage.ErrFenced, id)
	}
	return t.Tx.RevokeCredential(ctx, id, at)
}

// nameCheckReadsCommitted checks a name's active credential outside the
// transaction, so a rotation that revokes it first is refused.
var nameCheckReadsCommitted = txControl("name_check_reads_committed", "InsertCredential checks the name's active credential against what committed, not the transaction",
	func(s storage.Store, tx storage.Tx) storage.Tx { return committedNameTx{Tx: tx, s: s} })

type committedNameTx struct {
	storage.Tx
	s storage.Store
}

func (t committedNameTx) InsertCredential(ctx context.Context, c *storage.Credential) error {
	if c.Active() {
		if cur, err := t.s.GetActiveCredential(ctx, c.Name); err == nil && cur.ID != c.ID {
			return fmt.Errorf("%w: operator %s already has an active credential", storage.ErrDuplicate, c.Name)
		}
	}
	return t.Tx.InsertCredential(ctx, c)
}

var credentialsIgnoreUntil = stateless("credentials_ignore_until", "ListCredentials ignores the page's Until bound",
	func(s storage.Store) storage.Store { return credentialsNoUntil{s} })

func listCredentialsNoUntil(ctx context.Context, r storage.Reader, p *storage.ListCredentialsParams) ([]storage.Credential, error) {
	q := *p
	q.Until = nil
	return r.ListCredentials(ctx, &q)
}

type credentialsNoUntil struct{ storage.Store }

func (s credentialsNoUntil) ListCredentials(ctx context.Context, p *storage.ListCredentialsParams) ([]storage.Credential, error) {
	return listCredentialsNoUntil(ctx, s.Store, p)
}

func (s credentialsNoUntil) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	return s.Store.WithTx(ctx, func(tx storage.Tx) error { return fn(credentialsNoUntilTx{tx}) })
}

type credentialsNoUntilTx struct{ storage.Tx }

func (t credentialsNoUntilTx) ListCredentials(ctx context.Context, p *storage.ListCredentialsParams) ([]storage.Credential, error) {
	return listCredentialsNoUntil(ctx, t.Tx, p)
}

var credentialsIgnoreActive = stateless("credentials_ignore_active", "ListCredentials with Active lists revoked credentials too",
	func(s storage.Store) storage.Store { return credentialsAllActive{s} })

func listCredentialsAll(ctx context.Context, r storage.Reader, p *storage.ListCredentialsParams) ([]storage.Credential, error) {
	q := *p
	q.Active = false
	return r.ListCredentials(ctx, &q)
}

type credentialsAllActive struct{ storage.Store }

func (s credentialsAllActive) ListCredentials(ctx context.Context, p *storage.ListCredentialsParams) ([]storage.Credential, error) {
	return listCredentialsAll(ctx, s.Store, p)
}

func (s credentialsAllActive) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	return s.Store.WithTx(ctx, func(tx storage.Tx) error { return fn(credentialsAllActiveTx{tx}) })
}

type credentialsAllActiveTx struct{ storage.Tx }

func (t credentialsAllActiveTx) ListCredentials(ctx context.Context, p *storage.ListCredentialsParams) ([]storage.Credential, error) {
	return listCredentialsAll(ctx, t.Tx, p)
}

// forgetsCredentialRevocationsOnReopen keeps revocations in memory: after
// a restart a revoked operator credential reads as active.
var forgetsCredentialRevocationsOnReopen = afterReopen("forgets_credential_revocations_on_reopen", "credentials revoked before a reopen read as active after it",
	func(s storage.Store) storage.Store { return unrevokedCredentials{s} })

func activeOf(c storage.Credential, err error) (storage.Credential, error) {
	c.RevokedAt = time.Time{}
	return c, err
}

type unrevokedCredentials struct{ storage.Store }

func (s unrevokedCredentials) GetCredential(ctx context.Context, id string) (storage.Credential, error) {
	return activeOf(s.Store.GetCredential(ctx, id))
}

func (s unrevokedCredentials) GetCredentialByDigest(ctx context.Context, d []byte) (storage.Credential, error) {
	return activeOf(s.Store.GetCredentialByDigest(ctx, d))
}

func (s unrevokedCredentials) ListCredentials(ctx context.Context, p *storage.ListCredentialsParams) ([]storage.Credential, error) {
	cs, err := s.Store.ListCredentials(ctx, p)
	for i := range cs {
		cs[i].RevokedAt = time.Time{}
	}
	return cs, err
}
