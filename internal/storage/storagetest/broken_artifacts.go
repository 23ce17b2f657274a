package storagetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"

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

var artifactLosesLastChunk = stateless("artifact_loses_last_chunk", "an artifact's bytes read back without their last chunk",
	func(s storage.Store) storage.Store {
		return blobsWrapped{s, func(b storage.Blobs) storage.Blobs { return losesLastChunk{b} }}
	})

var artifactMetadataWithoutBytes = stateless("artifact_metadata_without_bytes", "an artifact's metadata commits without its bytes",
	func(s storage.Store) storage.Store {
		return blobsWrapped{s, func(b storage.Blobs) storage.Blobs { return withoutBytes{b} }}
	})

// blobsWrapped wraps the blob store of the engine.
type blobsWrapped struct {
	storage.Store
	wrap func(storage.Blobs) storage.Blobs
}

func (s blobsWrapped) ArtifactBlobs(dir string) (storage.Blobs, error) {
	b, err := s.Store.ArtifactBlobs(dir)
	if err != nil {
		return nil, err
	}
	return s.wrap(b), nil
}

// losesLastChunk opens an artifact's bytes up to the start of its last
// chunk.
type losesLastChunk struct{ storage.Blobs }

func (b losesLastChunk) Open(ctx context.Context, a storage.Artifact) (storage.Blob, error) {
	inner, err := b.Blobs.Open(ctx, a)
	if err != nil {
		return nil, err
	}
	keep := max(a.Size-1, 0) / storage.ArtifactChunkSize * storage.ArtifactChunkSize
	return cutBlob{io.NewSectionReader(inner, 0, keep), inner}, nil
}

type cutBlob struct {
	*io.SectionReader
	io.Closer
}

// withoutBytes stages nothing of an artifact's bytes while naming their
// size and digest, so that the metadata commits without them.
type withoutBytes struct{ storage.Blobs }

func (b withoutBytes) Stage(id string, r io.Reader) (storage.StagedBlob, error) {
	h := sha256.New()
	n, err := io.Copy(h, r)
	if err != nil {
		return nil, err
	}
	inner, err := b.Blobs.Stage(id, eofReader{})
	if err != nil {
		return nil, err
	}
	return namedStage{inner, n, hex.EncodeToString(h.Sum(nil))}, nil
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

type namedStage struct {
	storage.StagedBlob
	size   int64
	sha256 string
}

func (s namedStage) Size() int64    { return s.size }
func (s namedStage) SHA256() string { return s.sha256 }
