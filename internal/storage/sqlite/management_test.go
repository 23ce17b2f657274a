package sqlite_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/storage/storagetest"
)

func TestManagementRecords(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s := open(t, path)
	t0 := storagetest.T0
	d1, d2, d3 := sha256.Sum256([]byte("one")), sha256.Sum256([]byte("two")), sha256.Sum256([]byte("three"))

	err := s.WithTx(ctx, func(tx storage.Tx) error {
		if err := tx.InsertCredential(ctx, &storage.Credential{ID: "tok_1", Name: "local", Role: "admin", Digest: d1[:], CreatedAt: t0}); err != nil {
			return err
		}
		if err := tx.InsertCredential(ctx, &storage.Credential{ID: "tok_2", Name: "local", Role: "admin", Digest: d2[:], CreatedAt: t0}); !errors.Is(err, storage.ErrDuplicate) {
			t.Errorf("a second active credential for a name: %v", err)
		}
		if err := tx.InsertCredential(ctx, &storage.Credential{ID: "tok_3", Name: "alice", Role: "view", Digest: d1[:], CreatedAt: t0}); !errors.Is(err, storage.ErrDuplicate) {
			t.Errorf("a credential with a taken digest: %v", err)
		}
		if err := tx.RevokeCredential(ctx, "tok_1", t0.Add(time.Minute)); err != nil {
			return err
		}
		if err := tx.RevokeCredential(ctx, "tok_1", t0.Add(time.Hour)); err != nil {
			t.Errorf("revoking twice: %v", err)
		}
		if err := tx.RevokeCredential(ctx, "tok_none", t0); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("revoking an unknown id: %v", err)
		}
		if err := tx.InsertCredential(ctx, &storage.Credential{ID: "tok_2", Name: "local", Role: "admin", Digest: d2[:], CreatedAt: t0.Add(time.Minute)}); err != nil {
			return err
		}
		if err := tx.PutIdempotency(ctx, &storage.IdempotencyRecord{Principal: "operator:local", Key: "k", Method: "POST", Path: "/v1/work", BodyHash: "h1", Status: 201, Body: []byte(`{"a":1}`), CreatedAt: t0}); err != nil {
			return err
		}
		if err := tx.PutIdempotency(ctx, &storage.IdempotencyRecord{Principal: "operator:local", Key: "k", Method: "POST", Path: "/v1/work", BodyHash: "h2", Status: 200, Body: []byte(`{"a":2}`), CreatedAt: t0.Add(time.Hour)}); err != nil {
			return err
		}
		if err := tx.PutIdempotency(ctx, &storage.IdempotencyRecord{Principal: "operator:local", Key: "old", Method: "POST", Path: "/v1/x", BodyHash: "h", Status: 200, CreatedAt: t0.Add(-time.Hour)}); err != nil {
			return err
		}
		if err := tx.InsertGeneration(ctx, &storage.Generation{Number: 2, Hash: "h", CreatedAt: t0}); !errors.Is(err, storage.ErrFenced) {
			t.Errorf("generation 2 before 1: %v", err)
		}
		for n := int64(1); n <= 2; n++ {
			if err := tx.InsertGeneration(ctx, &storage.Generation{Number: n, Hash: "h" + string(rune('0'+n)), Normalized: []byte(`{"version":1}`), Actor: "operator:local", CreatedAt: t0}); err != nil {
				return err
			}
		}
		if err := tx.InsertGeneration(ctx, &storage.Generation{Number: 2, Hash: "x", CreatedAt: t0}); !errors.Is(err, storage.ErrDuplicate) {
			t.Errorf("generation 2 twice: %v", err)
		}
		if err := tx.PutScopeRecord(ctx, &storage.ScopeRecord{ID: "setup", Enabled: true, Active: true, Bindings: []string{"shell"}, Generation: 1, UpdatedAt: t0}); err != nil {
			return err
		}
		if err := tx.PutScopeRecord(ctx, &storage.ScopeRecord{ID: "setup", Parent: "root", Enabled: false, Removed: true, Generation: 2, UpdatedAt: t0}); err != nil {
			return err
		}
		if err := tx.InsertHostKey(ctx, &storage.HostKey{Name: "cursor", Value: d3[:], CreatedAt: t0}); err != nil {
			return err
		}
		if err := tx.InsertHostKey(ctx, &storage.HostKey{Name: "cursor", Value: d1[:], CreatedAt: t0}); !errors.Is(err, storage.ErrDuplicate) {
			t.Errorf("a second host key of a name: %v", err)
		}
		_, err := tx.InsertWork(ctx, &storage.InsertWorkParams{ID: "wrk_1", Scope: "setup", Binding: "shell", State: storage.WorkReady, CreatedAt: t0})
		if err != nil {
			return err
		}
		_, err = tx.InsertWork(ctx, &storage.InsertWorkParams{ID: "wrk_2", Scope: "setup", Binding: "shell", State: storage.WorkSucceeded, CreatedAt: t0})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	// Everything read back from a reopened file.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path)
	c, err := s.GetCredentialByDigest(ctx, d1[:])
	if err != nil || c.ID != "tok_1" || !c.RevokedAt.Equal(t0.Add(time.Minute)) || c.Active() {
		t.Errorf("revoked credential = %+v, %v; want the first revocation time kept", c, err)
	}
	if c, err := s.GetActiveCredential(ctx, "local"); err != nil || c.ID != "tok_2" || !bytes.Equal(c.Digest, d2[:]) {
		t.Errorf("active credential = %+v, %v", c, err)
	}
	if _, err := s.GetCredential(ctx, "tok_x"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("unknown credential: %v", err)
	}
	if list, err := s.ListCredentials(ctx, &storage.ListCredentialsParams{}); err != nil || len(list) != 2 || list[0].ID != "tok_1" || list[1].ID != "tok_2" {
		t.Errorf("credentials = %+v, %v", list, err)
	}
	rec, err := s.GetIdempotency(ctx, "operator:local", "k")
	if err != nil || rec.BodyHash != "h2" || rec.Status != 200 || string(rec.Body) != `{"a":2}` || !rec.CreatedAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("idempotency record = %+v, %v; want the replacement", rec, err)
	}
	if _, err := s.GetIdempotency(ctx, "operator:alice", "k"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("another principal's key: %v", err)
	}
	g, err := s.LatestGeneration(ctx)
	if err != nil || g.Number != 2 || g.Hash != "h2" || string(g.Normalized) != `{"version":1}` || g.Actor != "operator:local" {
		t.Errorf("latest generation = %+v, %v", g, err)
	}
	if g, err := s.GetGeneration(ctx, 1); err != nil || g.Hash != "h1" {
		t.Errorf("generation 1 = %+v, %v", g, err)
	}
	scopes, err := s.ListScopeRecords(ctx)
	if err != nil || len(scopes) != 1 || !scopes[0].Removed || scopes[0].Parent != "root" || scopes[0].Generation != 2 || len(scopes[0].Bindings) != 0 {
		t.Errorf("scope records = %+v, %v", scopes, err)
	}
	if n, err := s.CountWork(ctx, "setup", storage.NonterminalWorkStates); err != nil || n != 1 {
		t.Errorf("nonterminal work in setup = %d, %v; want 1", n, err)
	}
	if n, err := s.CountWork(ctx, "other", storage.NonterminalWorkStates); err != nil || n != 0 {
		t.Errorf("nonterminal work in other = %d, %v; want 0", n, err)
	}
	if k, err := s.GetHostKey(ctx, "cursor"); err != nil || !bytes.Equal(k.Value, d3[:]) {
		t.Errorf("host key = %+v, %v", k, err)
	}

	var swept int
	err = s.WithTx(ctx, func(tx storage.Tx) error {
		var err error
		swept, err = tx.DeleteIdempotencyBefore(ctx, t0)
		return err
	})
	if err != nil || swept != 1 {
		t.Errorf("swept %d, %v; want the one older record", swept, err)
	}
	if _, err := s.GetIdempotency(ctx, "operator:local", "old"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("swept record still there: %v", err)
	}
}

// Credentials page on (created_at, id) like every other list: a tie on
// created_at falls to the id, After is exclusive, Until inclusive, and a
// descending read of one row finds the listing's last.
func TestListCredentialsKeyset(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "state.db"))
	t0 := storagetest.T0
	// Inserted out of order; want is the (created_at, id) order.
	rows := []storage.Credential{
		{ID: "tok_c", Name: "carol", Role: "view", CreatedAt: t0.Add(time.Second)},
		{ID: "tok_b", Name: "bob", Role: "view", CreatedAt: t0},
		{ID: "tok_a", Name: "zed", Role: "admin", CreatedAt: t0.Add(time.Second)},
		{ID: "tok_e", Name: "amy", Role: "operate", CreatedAt: t0.Add(time.Nanosecond)},
		{ID: "tok_d", Name: "dan", Role: "view", CreatedAt: t0.Add(time.Hour), RevokedAt: t0.Add(2 * time.Hour)},
	}
	want := []string{"tok_b", "tok_e", "tok_a", "tok_c", "tok_d"}
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		for i := range rows {
			d := sha256.Sum256([]byte(rows[i].ID))
			rows[i].Digest = d[:]
			if err := tx.InsertCredential(ctx, &rows[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ids := func(list []storage.Credential, err error) []string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for _, c := range list {
			out = append(out, c.ID)
		}
		return out
	}
	eq := func(what string, got, want []string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	eq("all", ids(s.ListCredentials(ctx, &storage.ListCredentialsParams{})), want)
	eq("last", ids(s.ListCredentials(ctx, &storage.ListCredentialsParams{Page: storage.Page{Desc: true, Limit: 1}})), want[4:])
	eq("first two", ids(s.ListCredentials(ctx, &storage.ListCredentialsParams{Page: storage.Page{Limit: 2}})), want[:2])
	// After tok_e (a nanosecond after t0), up to tok_c inclusive: the tie
	// at t0+1s is split by id.
	after := &storage.Position{CreatedAt: t0.Add(time.Nanosecond), ID: "tok_e"}
	until := &storage.Position{CreatedAt: t0.Add(time.Second), ID: "tok_c"}
	eq("window", ids(s.ListCredentials(ctx, &storage.ListCredentialsParams{Page: storage.Page{After: after, Until: until}})), want[2:4])
	eq("window of one", ids(s.ListCredentials(ctx, &storage.ListCredentialsParams{Page: storage.Page{After: after, Until: until, Limit: 1}})), want[2:3])
	// (t0+1s, tok_b) lies between tok_a and tok_c.
	between := &storage.Position{CreatedAt: t0.Add(time.Second), ID: "tok_b"}
	eq("after a position between rows", ids(s.ListCredentials(ctx, &storage.ListCredentialsParams{Page: storage.Page{After: between}})), want[3:])
	if list, err := s.ListCredentials(ctx, &storage.ListCredentialsParams{Page: storage.Page{After: &storage.Position{CreatedAt: t0.Add(time.Hour), ID: "tok_d"}}}); err != nil || list == nil || len(list) != 0 {
		t.Errorf("after the last = %#v, %v", list, err)
	}
	// A revoked credential keeps its revocation time through the listing.
	if list, _ := s.ListCredentials(ctx, &storage.ListCredentialsParams{Page: storage.Page{Desc: true, Limit: 1}}); len(list) != 1 || list[0].Active() || !list[0].RevokedAt.Equal(t0.Add(2*time.Hour)) {
		t.Errorf("revoked credential listed as %+v", list)
	}
}

func TestEmptyManagementRecords(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "state.db"))
	if _, err := s.LatestGeneration(ctx); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("latest generation of an empty store: %v", err)
	}
	if list, err := s.ListCredentials(ctx, &storage.ListCredentialsParams{}); err != nil || list == nil || len(list) != 0 {
		t.Errorf("credentials of an empty store = %#v, %v", list, err)
	}
	if list, err := s.ListScopeRecords(ctx); err != nil || list == nil || len(list) != 0 {
		t.Errorf("scope records of an empty store = %#v, %v", list, err)
	}
}
