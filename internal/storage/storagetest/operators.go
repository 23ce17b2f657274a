package storagetest

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// Operator credentials: stored by digest only; a name has at most one
// active credential; revocation keeps its first time; a rotation revokes
// and inserts in one transaction; listed on (created_at, id), all of them
// or the active ones only.

func operatorCases() []Case {
	return []Case{
		{Name: "credential_round_trip", Run: plain(credentialRoundTrip), Control: dropsCredentialRole},
		{Name: "credential_unique", Run: plain(credentialUnique), Control: swallowsDuplicateCredentials},
		{Name: "credential_revoke", Run: plain(credentialRevoke), Control: refusesSecondRevocation},
		{Name: "credential_revoke_and_insert", Run: plain(credentialRevokeAndInsert), Control: nameCheckReadsCommitted},
		{Name: "credential_list_keyset", Run: plain(credentialListKeyset), Control: credentialsIgnoreUntil},
		{Name: "credential_list_active", Run: plain(credentialListActive), Control: credentialsIgnoreActive},
		{Name: "credentials_survive_reopen", Run: credentialsSurviveReopen, Control: forgetsCredentialRevocationsOnReopen},
	}
}

func credential(id, name, role string, sec int) *storage.Credential {
	return &storage.Credential{ID: id, Name: name, Role: role, Digest: digest("credential " + id), CreatedAt: at(sec)}
}

func insertCredentials(ctx context.Context, s storage.Store, cs ...*storage.Credential) error {
	return s.WithTx(ctx, func(tx storage.Tx) error {
		for _, c := range cs {
			if err := tx.InsertCredential(ctx, c); err != nil {
				return err
			}
		}
		return nil
	})
}

func revokeCredential(ctx context.Context, s storage.Store, id string, at time.Time) error {
	return s.WithTx(ctx, func(tx storage.Tx) error { return tx.RevokeCredential(ctx, id, at) })
}

func credentialRoundTrip(ctx context.Context, s storage.Store) error {
	in := credential("tok_1", "alice", "admin", 1)
	if err := insertCredentials(ctx, s, in); err != nil {
		return err
	}
	byID, err := s.GetCredential(ctx, "tok_1")
	if err != nil {
		return err
	}
	byDigest, err := s.GetCredentialByDigest(ctx, in.Digest)
	if err != nil {
		return err
	}
	active, err := s.GetActiveCredential(ctx, "alice")
	if err != nil {
		return err
	}
	_, noID := s.GetCredential(ctx, "tok_none")
	_, noDigest := s.GetCredentialByDigest(ctx, digest("unknown"))
	_, noName := s.GetActiveCredential(ctx, "bob")
	return first(
		want(byID.ID == "tok_1" && byID.Name == "alice" && byID.Role == "admin" && bytes.Equal(byID.Digest, in.Digest) && byID.CreatedAt.Equal(at(1)) && byID.Active(),
			"credential = %+v", byID),
		want(same(byDigest, byID) && same(active, byID), "by digest %+v and active by name %+v differ from by id %+v", byDigest, active, byID),
		wantErr(noID, storage.ErrNotFound, "an unknown credential id"),
		wantErr(noDigest, storage.ErrNotFound, "an unknown digest"),
		wantErr(noName, storage.ErrNotFound, "a name without a credential"),
	)
}

func credentialUnique(ctx context.Context, s storage.Store) error {
	if err := insertCredentials(ctx, s, credential("tok_1", "local", "admin", 1)); err != nil {
		return err
	}
	sameID := credential("tok_1", "bob", "view", 2)
	sameID.Digest = digest("other")
	sameDigest := credential("tok_2", "bob", "view", 2)
	sameDigest.Digest = digest("credential tok_1")
	secondActive := credential("tok_3", "local", "view", 2)
	revoked := credential("tok_4", "local", "view", 2)
	revoked.RevokedAt = at(3)
	var errID, errDigest, errActive, errRevoked error
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		errID = tx.InsertCredential(ctx, sameID)
		errDigest = tx.InsertCredential(ctx, sameDigest)
		errActive = tx.InsertCredential(ctx, secondActive)
		// A revoked credential of a name with an active one is no second
		// active one.
		errRevoked = tx.InsertCredential(ctx, revoked)
		return nil
	})
	if err != nil {
		return err
	}
	all, err := s.ListCredentials(ctx, &storage.ListCredentialsParams{})
	if err != nil {
		return err
	}
	active, err := s.GetActiveCredential(ctx, "local")
	if err != nil {
		return err
	}
	ids := list(all, func(c storage.Credential) string { return c.ID })
	return first(
		wantErr(errID, storage.ErrDuplicate, "a second credential with the same id"),
		wantErr(errDigest, storage.ErrDuplicate, "a second credential with the same digest"),
		wantErr(errActive, storage.ErrDuplicate, "a second active credential of a name"),
		want(errRevoked == nil, "a revoked credential of a name with an active one was refused: %v", errRevoked),
		want(ids == "[tok_1 tok_4]", "credentials = %s, want [tok_1 tok_4]", ids),
		want(active.ID == "tok_1" && active.Role == "admin", "the active credential of local = %+v", active),
	)
}

func credentialRevoke(ctx context.Context, s storage.Store) error {
	if err := insertCredentials(ctx, s, credential("tok_1", "local", "admin", 1)); err != nil {
		return err
	}
	if err := revokeCredential(ctx, s, "tok_1", at(10)); err != nil {
		return err
	}
	again := revokeCredential(ctx, s, "tok_1", at(20))
	unknown := revokeCredential(ctx, s, "tok_none", at(20))
	c, err := s.GetCredential(ctx, "tok_1")
	if err != nil {
		return err
	}
	byDigest, err := s.GetCredentialByDigest(ctx, digest("credential tok_1"))
	if err != nil {
		return fmt.Errorf("a revoked credential by its digest (the host must see it is revoked): %w", err)
	}
	_, noActive := s.GetActiveCredential(ctx, "local")
	next := insertCredentials(ctx, s, credential("tok_2", "local", "admin", 11))
	active, err := s.GetActiveCredential(ctx, "local")
	return first(
		want(again == nil, "revoking a revoked credential: %v", again),
		wantErr(unknown, storage.ErrNotFound, "revoking an unknown credential"),
		want(!c.Active() && c.RevokedAt.Equal(at(10)), "revoked credential = %+v, want the first revocation time kept", c),
		want(!byDigest.Active() && byDigest.ID == "tok_1", "the revoked credential by digest = %+v", byDigest),
		wantErr(noActive, storage.ErrNotFound, "the active credential of a name whose credential was revoked"),
		want(next == nil, "a new credential of the name after the revocation: %v", next),
		err,
		want(active.ID == "tok_2", "active credential after the new one = %+v", active),
	)
}

// credentialRevokeAndInsert: a rotation revokes a name's credential and
// inserts its successor in one transaction; a failed insert undoes the
// revocation.
func credentialRevokeAndInsert(ctx context.Context, s storage.Store) error {
	if err := insertCredentials(ctx, s, credential("tok_1", "local", "admin", 1)); err != nil {
		return err
	}
	rotate := func(id string, at time.Time, next *storage.Credential) error {
		return s.WithTx(ctx, func(tx storage.Tx) error {
			cur, err := tx.GetCredential(ctx, id)
			if err != nil {
				return err
			}
			if !cur.Active() {
				return fmt.Errorf("credential %s is revoked", id)
			}
			if err := tx.RevokeCredential(ctx, id, at); err != nil {
				return err
			}
			return tx.InsertCredential(ctx, next)
		})
	}
	if err := rotate("tok_1", at(5), credential("tok_2", "local", "admin", 5)); err != nil {
		return fmt.Errorf("revoke and insert in one transaction: %w", err)
	}
	bad := credential("tok_3", "local", "admin", 6)
	bad.Digest = digest("credential tok_1")
	failed := rotate("tok_2", at(6), bad)
	active, err := s.GetActiveCredential(ctx, "local")
	if err != nil {
		return fmt.Errorf("the active credential after a failed rotation: %w", err)
	}
	old, err := s.GetCredential(ctx, "tok_1")
	if err != nil {
		return err
	}
	_, tok3 := s.GetCredential(ctx, "tok_3")
	return first(
		wantErr(failed, storage.ErrDuplicate, "a rotation to a taken digest"),
		want(active.ID == "tok_2" && active.Active(), "active credential = %+v, want tok_2 still active", active),
		want(!old.Active() && old.RevokedAt.Equal(at(5)), "rotated-out credential = %+v", old),
		wantErr(tok3, storage.ErrNotFound, "the credential of the failed rotation"),
	)
}

// credentialListKeyset: credentials page on (created_at, id) like every
// list: a tie on created_at falls to the id, After is exclusive, Until
// inclusive, a descending read of one row finds the last, and an empty
// list is empty, not nil.
func credentialListKeyset(ctx context.Context, s storage.Store) error {
	if empty, err := s.ListCredentials(ctx, &storage.ListCredentialsParams{}); err != nil || empty == nil || len(empty) != 0 {
		return fmt.Errorf("credentials of an empty store = %#v, %v; want an empty list", empty, err)
	}
	ms := time.Millisecond
	rows := []*storage.Credential{
		{ID: "tok_c", Name: "carol", Role: "view", CreatedAt: T0.Add(time.Second)},
		{ID: "tok_b", Name: "bob", Role: "view", CreatedAt: T0},
		{ID: "tok_a", Name: "zed", Role: "admin", CreatedAt: T0.Add(time.Second)},
		{ID: "tok_e", Name: "amy", Role: "operate", CreatedAt: T0.Add(ms)},
		{ID: "tok_d", Name: "dan", Role: "view", CreatedAt: T0.Add(time.Hour), RevokedAt: T0.Add(2 * time.Hour)},
	}
	for _, r := range rows {
		r.Digest = digest(r.ID)
	}
	if err := insertCredentials(ctx, s, rows...); err != nil {
		return err
	}
	ids := func(p storage.Page) (string, error) {
		cs, err := s.ListCredentials(ctx, &storage.ListCredentialsParams{Page: p})
		if err == nil && cs == nil {
			return "nil", nil
		}
		return list(cs, func(c storage.Credential) string { return c.ID }), err
	}
	after := &storage.Position{CreatedAt: T0.Add(ms), ID: "tok_e"}
	until := &storage.Position{CreatedAt: T0.Add(time.Second), ID: "tok_c"}
	between := &storage.Position{CreatedAt: T0.Add(time.Second), ID: "tok_b"}
	checks := []struct {
		p    storage.Page
		want string
	}{
		{storage.Page{}, "[tok_b tok_e tok_a tok_c tok_d]"},
		{storage.Page{Desc: true, Limit: 1}, "[tok_d]"},
		{storage.Page{Limit: 2}, "[tok_b tok_e]"},
		{storage.Page{After: after, Until: until}, "[tok_a tok_c]"},
		{storage.Page{After: after, Until: until, Limit: 1}, "[tok_a]"},
		{storage.Page{After: between}, "[tok_c tok_d]"},
		{storage.Page{After: &storage.Position{CreatedAt: T0.Add(time.Hour), ID: "tok_d"}}, "[]"},
	}
	for _, c := range checks {
		got, err := ids(c.p)
		if err != nil {
			return err
		}
		if got != c.want {
			return fmt.Errorf("ListCredentials(%+v) = %s, want %s", c.p, got, c.want)
		}
	}
	last, err := s.ListCredentials(ctx, &storage.ListCredentialsParams{Page: storage.Page{Desc: true, Limit: 1}})
	return first(err, want(len(last) == 1 && !last[0].Active() && last[0].RevokedAt.Equal(T0.Add(2*time.Hour)), "the revoked credential listed as %+v", last))
}

// credentialListActive: with Active only the credentials not revoked are
// listed, still on (created_at, id) and within the page's window, so a
// descending read of one row finds the last active one.
func credentialListActive(ctx context.Context, s storage.Store) error {
	rows := []*storage.Credential{
		credential("tok_a", "amy", "view", 1), credential("tok_b", "bob", "view", 2),
		credential("tok_c", "carol", "admin", 3), credential("tok_d", "dan", "operate", 4),
	}
	if err := insertCredentials(ctx, s, rows...); err != nil {
		return err
	}
	for _, id := range []string{"tok_b", "tok_d"} {
		if err := revokeCredential(ctx, s, id, at(10)); err != nil {
			return err
		}
	}
	ids := func(p storage.ListCredentialsParams) (string, error) {
		cs, err := s.ListCredentials(ctx, &p)
		return list(cs, func(c storage.Credential) string { return c.ID }), err
	}
	checks := []struct {
		p    storage.ListCredentialsParams
		want string
	}{
		{storage.ListCredentialsParams{}, "[tok_a tok_b tok_c tok_d]"},
		{storage.ListCredentialsParams{Active: true}, "[tok_a tok_c]"},
		{storage.ListCredentialsParams{Active: true, Page: storage.Page{Desc: true, Limit: 1}}, "[tok_c]"},
		{storage.ListCredentialsParams{Active: true, Page: storage.Page{After: &storage.Position{CreatedAt: at(1), ID: "tok_a"}, Limit: 1}}, "[tok_c]"},
	}
	for _, c := range checks {
		got, err := ids(c.p)
		if err != nil {
			return err
		}
		if got != c.want {
			return fmt.Errorf("ListCredentials(%+v) = %s, want %s", c.p, got, c.want)
		}
	}
	return nil
}

func credentialsSurviveReopen(ctx context.Context, env *Env) error {
	if err := insertCredentials(ctx, env.Store, credential("tok_1", "local", "admin", 1), credential("tok_2", "alice", "view", 2)); err != nil {
		return err
	}
	if err := revokeCredential(ctx, env.Store, "tok_1", at(5)); err != nil {
		return err
	}
	if err := env.Reopen(); err != nil {
		return err
	}
	s := env.Store
	old, err := s.GetCredentialByDigest(ctx, digest("credential tok_1"))
	if err != nil {
		return fmt.Errorf("a credential after a reopen: %w", err)
	}
	alice, err := s.GetActiveCredential(ctx, "alice")
	if err != nil {
		return fmt.Errorf("an active credential after a reopen: %w", err)
	}
	_, local := s.GetActiveCredential(ctx, "local")
	all, err := s.ListCredentials(ctx, &storage.ListCredentialsParams{})
	if err != nil {
		return err
	}
	return first(
		want(!old.Active() && old.RevokedAt.Equal(at(5)) && old.Role == "admin", "the revoked credential after a reopen = %+v", old),
		want(alice.ID == "tok_2" && alice.Role == "view", "alice's credential after a reopen = %+v", alice),
		wantErr(local, storage.ErrNotFound, "the active credential of a name revoked before the reopen"),
		want(len(all) == 2 && !all[0].Active() && all[1].Active(), "credentials listed after a reopen = %+v", all),
	)
}
