package storage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/open-conduit/open-conduit/internal/atomicfile"
)

// Artifacts keeps the bytes of artifacts as files in one directory, named by
// artifact id, and their metadata in the Store. Bytes are written (and
// synced) before the metadata commits, so a committed Artifact always has its
// file; a file whose metadata never committed is invisible.
type Artifacts struct {
	store Store
	dir   string
}

// NewArtifacts returns the artifact store over dir, creating it owner-only.
func NewArtifacts(store Store, dir string) (*Artifacts, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("storage: create the artifact directory: %w", err)
	}
	return &Artifacts{store: store, dir: dir}, nil
}

// Staged is an artifact whose bytes are on disk and whose metadata has not
// been committed yet.
type Staged struct {
	a      *Artifacts
	id     string
	size   int64
	sha256 string
}

// ID is the staged artifact's id.
func (s *Staged) ID() string { return s.id }

// validArtifactID keeps artifact ids usable as file names.
func validArtifactID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

func (a *Artifacts) path(id string) string { return filepath.Join(a.dir, id) }

// Stage copies r into the directory as the bytes of artifact id. An id
// whose bytes are already there (a committed artifact, or another stage)
// is ErrDuplicate and its file is left untouched: staging never replaces
// the bytes of an artifact, so a refused commit cannot take them with it.
func (a *Artifacts) Stage(id string, r io.Reader) (*Staged, error) {
	st, err := a.StageUnsynced(id, r)
	if err != nil {
		return nil, err
	}
	if err := a.SyncNames(); err != nil {
		_ = st.Discard()
		return nil, fmt.Errorf("storage: stage artifact: %w", err)
	}
	return st, nil
}

// StageUnsynced is Stage whose bytes are synced but whose name is not yet
// durable: the caller calls SyncNames before any of its stages' metadata
// commits, once for as many stages as it made. A crash before SyncNames
// may lose the file, never a committed artifact's.
func (a *Artifacts) StageUnsynced(id string, r io.Reader) (*Staged, error) {
	if !validArtifactID(id) {
		return nil, fmt.Errorf("storage: artifact id %q is not a plain identifier", id)
	}
	h := sha256.New()
	n, err := atomicfile.WriteNewFrom(a.path(id), io.TeeReader(r, h), 0o600, atomicfile.TempPrefix(".stage-"), atomicfile.NoDirSync())
	if errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("%w: artifact %s already has its bytes; stage it under a new id", ErrDuplicate, id)
	}
	if err != nil {
		return nil, fmt.Errorf("storage: stage artifact: %w", err)
	}
	return &Staged{a: a, id: id, size: n, sha256: hex.EncodeToString(h.Sum(nil))}, nil
}

// SyncNames makes the names of every artifact staged so far durable (one
// sync of the directory).
func (a *Artifacts) SyncNames() error { return atomicfile.SyncDir(a.dir) }

// Commit records the staged artifact's metadata in tx. meta's ID, Size and
// SHA256 are taken from the staged bytes.
func (s *Staged) Commit(ctx context.Context, tx Tx, meta Artifact) (Artifact, error) {
	meta.ID, meta.Size, meta.SHA256 = s.id, s.size, s.sha256
	if err := tx.InsertArtifact(ctx, &meta); err != nil {
		return Artifact{}, err
	}
	return meta, nil
}

// Discard removes staged bytes whose metadata was not committed.
func (s *Staged) Discard() error {
	err := os.Remove(s.a.path(s.id))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

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
// start; the file supports Seek and ReadAt for range reads. The caller
// closes it.
func (a *Artifacts) Open(ctx context.Context, id string) (Artifact, *os.File, error) {
	meta, err := a.store.GetArtifact(ctx, id)
	if err != nil {
		return Artifact{}, nil, err
	}
	if !validArtifactID(meta.ID) {
		return Artifact{}, nil, fmt.Errorf("storage: artifact id %q is not a plain identifier", id)
	}
	f, err := os.Open(a.path(meta.ID))
	if err != nil {
		return Artifact{}, nil, fmt.Errorf("storage: artifact %s has no bytes: %w", id, err)
	}
	return meta, f, nil
}
