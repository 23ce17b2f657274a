package storage

import (
	"context"
	"fmt"
	"io"
	"os"
)

// Artifacts keeps artifacts: their bytes where the store's engine keeps
// them (Store.ArtifactBlobs: files in one directory, named by artifact
// id, or chunks in the database) and their metadata in the Store. Bytes
// are staged before the metadata commits and committed with it, so a
// committed Artifact always has its bytes; bytes whose metadata never
// committed are invisible.
type Artifacts struct {
	store Store
	blobs Blobs
}

// NewArtifacts returns the artifact store over dir, creating it owner-only:
// the directory of the bytes themselves, or of bytes on their way into the
// database, as the store's engine keeps them.
func NewArtifacts(store Store, dir string) (*Artifacts, error) {
	blobs, err := store.ArtifactBlobs(dir)
	if err != nil {
		return nil, err
	}
	return &Artifacts{store: store, blobs: blobs}, nil
}

// Staged is an artifact whose bytes are staged and whose metadata has not
// been committed yet.
type Staged struct {
	id   string
	blob StagedBlob
}

// ID is the staged artifact's id.
func (s *Staged) ID() string { return s.id }

// Stage takes the bytes of artifact id from r. An id whose bytes are
// already kept (a committed artifact, or another stage) is ErrDuplicate,
// here or at the commit, and the bytes kept are left untouched: staging
// never replaces the bytes of an artifact, so a refused commit cannot take
// them with it.
func (a *Artifacts) Stage(id string, r io.Reader) (*Staged, error) {
	if err := checkArtifactID(id); err != nil {
		return nil, err
	}
	b, err := a.blobs.Stage(id, r)
	if err != nil {
		return nil, err
	}
	return &Staged{id: id, blob: b}, nil
}

// StageUnsynced is Stage for a caller that stages several artifacts and
// then calls SyncNames once, before any of their metadata commits: where
// bytes are files, each file is synced but its name is not yet durable (a
// crash before SyncNames may lose the file, never a committed artifact's).
// Where bytes go into the database it is Stage.
func (a *Artifacts) StageUnsynced(id string, r io.Reader) (*Staged, error) {
	if err := checkArtifactID(id); err != nil {
		return nil, err
	}
	u, ok := a.blobs.(namesSyncer)
	if !ok {
		return a.Stage(id, r)
	}
	b, err := u.StageUnsynced(id, r)
	if err != nil {
		return nil, err
	}
	return &Staged{id: id, blob: b}, nil
}

// SyncNames makes the names of every artifact staged so far durable: one
// sync of the directory where bytes are files, nothing otherwise.
func (a *Artifacts) SyncNames() error {
	if u, ok := a.blobs.(namesSyncer); ok {
		return u.SyncNames()
	}
	return nil
}

// namesSyncer is Blobs whose staged names become durable apart from their
// bytes (files in a directory).
type namesSyncer interface {
	StageUnsynced(id string, r io.Reader) (StagedBlob, error)
	SyncNames() error
}

// Commit records the staged artifact's metadata and its bytes in tx.
// meta's ID, Size and SHA256 are taken from the staged bytes. It may be
// called again in another transaction when the first rolled back.
func (s *Staged) Commit(ctx context.Context, tx Tx, meta Artifact) (Artifact, error) {
	meta.ID, meta.Size, meta.SHA256 = s.id, s.blob.Size(), s.blob.SHA256()
	if err := tx.InsertArtifact(ctx, &meta); err != nil {
		return Artifact{}, err
	}
	if err := s.blob.Commit(ctx, tx); err != nil {
		return Artifact{}, err
	}
	return meta, nil
}

// Done releases what staging kept outside the store once the transaction
// of Commit committed.
func (s *Staged) Done() error { return s.blob.Done() }

// Discard removes staged bytes whose metadata was not committed.
func (s *Staged) Discard() error { return s.blob.Discard() }

// Put stores the bytes of r and the metadata in one step.
func (a *Artifacts) Put(ctx context.Context, meta Artifact, r io.Reader) (Artifact, error) {
	st, err := a.Stage(meta.ID, r)
	if err != nil {
		return Artifact{}, err
	}
	var out Artifact
	err = a.store.WithTx(ctx, func(tx Tx) error {
		out, err = st.Commit(ctx, tx, meta)
		return err
	})
	if err != nil {
		_ = st.Discard()
		return Artifact{}, err
	}
	_ = st.Done()
	return out, nil
}

// PutFile stores the file at path.
func (a *Artifacts) PutFile(ctx context.Context, meta Artifact, path string) (Artifact, error) {
	f, err := os.Open(path)
	if err != nil {
		return Artifact{}, fmt.Errorf("storage: read artifact %s: %w", meta.Name, err)
	}
	defer f.Close()
	return a.Put(ctx, meta, f)
}

// Open returns an artifact's metadata and its bytes, positioned at the
// start; they support Seek and ReadAt for range reads. The caller closes
// them.
func (a *Artifacts) Open(ctx context.Context, id string) (Artifact, Blob, error) {
	meta, err := a.store.GetArtifact(ctx, id)
	if err != nil {
		return Artifact{}, nil, err
	}
	b, err := a.blobs.Open(ctx, meta)
	if err != nil {
		return Artifact{}, nil, err
	}
	return meta, b, nil
}
