package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// The host's keys, the list cursor key among them: generated once, kept
// byte for byte, never replaced, and surviving a restart (so do the
// cursors it signed).

func cursorKeyCases() []Case {
	return []Case{
		{Name: "cursor_key_once", Run: plain(cursorKeyOnce), Control: hostKeySwallowsDuplicate},
		{Name: "cursor_key_binary", Run: plain(cursorKeyBinary), Control: hostKeyAsText},
		{Name: "cursor_key_survives_reopen", Run: cursorKeySurvivesReopen, Control: forgetsHostKeysOnReopen},
	}
}

// cursorKeyName is the name the management API keeps its cursor key under.
const cursorKeyName = "management.cursor"

func keyBytes(seed byte) []byte {
	k := make([]byte, 32)
	for i := range k {
		k[i] = seed + byte(i)*37
	}
	return k
}

func insertHostKey(ctx context.Context, s storage.Store, k *storage.HostKey) error {
	return s.WithTx(ctx, func(tx storage.Tx) error { return tx.InsertHostKey(ctx, k) })
}

// loadCursorKey gets the cursor key, generating it from seed the first
// time, as the management API does at start.
func loadCursorKey(ctx context.Context, s storage.Store, seed byte, sec int) ([]byte, error) {
	if k, err := s.GetHostKey(ctx, cursorKeyName); err == nil {
		return k.Value, nil
	} else if !errors.Is(err, storage.ErrNotFound) {
		return nil, err
	}
	var out []byte
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		if k, err := tx.GetHostKey(ctx, cursorKeyName); err == nil {
			out = k.Value
			return nil
		}
		out = keyBytes(seed)
		return tx.InsertHostKey(ctx, &storage.HostKey{Name: cursorKeyName, Value: out, CreatedAt: at(sec)})
	})
	return out, err
}

func cursorKeyOnce(ctx context.Context, s storage.Store) error {
	if _, err := s.GetHostKey(ctx, cursorKeyName); !errors.Is(err, storage.ErrNotFound) {
		return fmt.Errorf("the cursor key of an empty store: %v", err)
	}
	if err := insertHostKey(ctx, s, &storage.HostKey{Name: cursorKeyName, Value: keyBytes(1), CreatedAt: at(1)}); err != nil {
		return err
	}
	again := insertHostKey(ctx, s, &storage.HostKey{Name: cursorKeyName, Value: keyBytes(2), CreatedAt: at(2)})
	other := insertHostKey(ctx, s, &storage.HostKey{Name: "other.key", Value: keyBytes(3), CreatedAt: at(3)})
	k, err := s.GetHostKey(ctx, cursorKeyName)
	if err != nil {
		return err
	}
	o, err := s.GetHostKey(ctx, "other.key")
	return first(err,
		wantErr(again, storage.ErrDuplicate, "a second key of the same name"),
		want(other == nil, "a key of another name: %v", other),
		want(k.Name == cursorKeyName && bytes.Equal(k.Value, keyBytes(1)) && k.CreatedAt.Equal(at(1)), "the cursor key = %+v, want the first one", k),
		want(bytes.Equal(o.Value, keyBytes(3)), "the other key = %x", o.Value),
	)
}

// cursorKeyBinary: a key is bytes, not text: zero bytes and bytes that
// are not UTF-8 come back as they went in.
func cursorKeyBinary(ctx context.Context, s storage.Store) error {
	value := []byte{0x7f, 0x00, 0xff, 0xfe, 0x00, 0x00, 0xc3, 0x28, 0x01}
	value = append(value, keyBytes(9)...)
	if err := insertHostKey(ctx, s, &storage.HostKey{Name: cursorKeyName, Value: value, CreatedAt: at(1)}); err != nil {
		return err
	}
	k, err := s.GetHostKey(ctx, cursorKeyName)
	return first(err, want(bytes.Equal(k.Value, value), "the key read back = %x, want %x", k.Value, value))
}

func cursorKeySurvivesReopen(ctx context.Context, env *Env) error {
	k1, err := loadCursorKey(ctx, env.Store, 1, 1)
	if err != nil {
		return err
	}
	if err := env.Reopen(); err != nil {
		return err
	}
	k2, err := loadCursorKey(ctx, env.Store, 2, 2)
	if err != nil {
		return fmt.Errorf("loading the cursor key after a reopen: %w", err)
	}
	k, err := env.Store.GetHostKey(ctx, cursorKeyName)
	return first(err,
		want(bytes.Equal(k1, k2), "the cursor key after a reopen = %x, before it %x: cursors signed before a restart no longer verify", k2, k1),
		want(k.CreatedAt.Equal(at(1)), "the cursor key was created at %v, want %v", k.CreatedAt, at(1)),
	)
}
