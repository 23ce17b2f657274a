package storagetest

import (
	"context"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// Controls of the artifacts area.

var artifactListIgnoresAfter = stateless("artifact_list_ignores_after", "ListArtifacts ignores the page's After position",
	func(s storage.Store) storage.Store {
		return artifactListMod{s, func(p *storage.ListArtifactsParams) { p.After = nil }}
	})

var artifactListIgnoresWork = stateless("artifact_list_ignores_work", "ListArtifacts ignores the Work filter",
	func(s storage.Store) storage.Store {
		return artifactListMod{s, func(p *storage.ListArtifactsParams) { p.Work = "" }}
	})

// artifactListMod changes the parameters of every ListArtifacts.
type artifactListMod struct {
	storage.Store
	mod func(p *storage.ListArtifactsParams)
}

func (s artifactListMod) ListArtifacts(ctx context.Context, p *storage.ListArtifactsParams) ([]storage.Artifact, error) {
	q := *p
	s.mod(&q)
	return s.Store.ListArtifacts(ctx, &q)
}

func (s artifactListMod) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	return s.Store.WithTx(ctx, func(tx storage.Tx) error { return fn(artifactListModTx{tx, s.mod}) })
}

type artifactListModTx struct {
	storage.Tx
	mod func(p *storage.ListArtifactsParams)
}

func (t artifactListModTx) ListArtifacts(ctx context.Context, p *storage.ListArtifactsParams) ([]storage.Artifact, error) {
	q := *p
	t.mod(&q)
	return t.Tx.ListArtifacts(ctx, &q)
}

var artifactForgetsSize = txControl("artifact_forgets_size", "an artifact's metadata is stored without the size of its bytes",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return forgetsSizeTx{tx} })

type forgetsSizeTx struct{ storage.Tx }

func (t forgetsSizeTx) InsertArtifact(ctx context.Context, a *storage.Artifact) error {
	b := *a
	b.Size = 0
	return t.Tx.InsertArtifact(ctx, &b)
}
