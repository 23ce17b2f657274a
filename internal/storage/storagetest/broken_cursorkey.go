package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// Controls of the cursorkey area: the host's keys.

var hostKeySwallowsDuplicate = txControl("host_key_swallows_duplicate", "InsertHostKey of a name that has a key reports success",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return swallowsHostKeyTx{tx} })

type swallowsHostKeyTx struct{ storage.Tx }

func (t swallowsHostKeyTx) InsertHostKey(ctx context.Context, k *storage.HostKey) error {
	if err := t.Tx.InsertHostKey(ctx, k); !errors.Is(err, storage.ErrDuplicate) {
		return err
	}
	return nil
}

// hostKeyAsText stores a key as a C string: it ends at the first zero
// byte.
var hostKeyAsText = txControl("host_key_as_text", "a host key is stored as text, cut at its first zero byte",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return textKeyTx{tx} })

type textKeyTx struct{ storage.Tx }

func (t textKeyTx) InsertHostKey(ctx context.Context, k *storage.HostKey) error {
	c := *k
	if i := bytes.IndexByte(c.Value, 0); i > 0 {
		c.Value = c.Value[:i]
	}
	return t.Tx.InsertHostKey(ctx, &c)
}

// forgetsHostKeysOnReopen keeps host keys in memory: a restarted host has
// none.
var forgetsHostKeysOnReopen = afterReopen("forgets_host_keys_on_reopen", "host keys stored before a reopen are gone after it",
	func(s storage.Store) storage.Store { return forgetsHostKeys{s} })

type forgetsHostKeys struct{ storage.Store }

func (s forgetsHostKeys) GetHostKey(_ context.Context, name string) (storage.HostKey, error) {
	return storage.HostKey{}, fmt.Errorf("%w: host key %s", storage.ErrNotFound, name)
}

func (s forgetsHostKeys) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	return s.Store.WithTx(ctx, func(tx storage.Tx) error { return fn(forgetsHostKeysTx{tx}) })
}

type forgetsHostKeysTx struct{ storage.Tx }

func (t forgetsHostKeysTx) GetHostKey(_ context.Context, name string) (storage.HostKey, error) {
	return storage.HostKey{}, fmt.Errorf("%w: host key %s", storage.ErrNotFound, name)
}
