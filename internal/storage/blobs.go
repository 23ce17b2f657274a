package storage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/open-conduit/open-conduit/internal/atomicfile"
)

// Blobs keeps the bytes of artifacts for an engine; the engine chooses
// which (Store.ArtifactBlobs): files in the daemon's own directory
// (FileBlobs, SQLite's) or chunks in the database beside the metadata
// (ChunkBlobs, PostgreSQL's, so that every daemon on the database reads
// them). Either way bytes are staged outside any transaction, committed
// in the transaction that inserts their metadata, and read back in
// pieces: an artifact is never held in memory whole.
type Blobs interface {
	// Stage reads r to its end as the bytes of artifact id, counting and
	// hashing them. Nothing is visible until Commit's transaction
	// commits.
	Stage(id string, r io.Reader) (StagedBlob, error)
	// Open opens the bytes of a committed artifact.
	Open(ctx context.Context, a Artifact) (Blob, error)
}

// StagedBlob is bytes staged for one artifact.
type StagedBlob interface {
	// Size and SHA256 (hex) describe the staged bytes.
	Size() int64
	SHA256() string
	// Commit makes the bytes part of tx, after the artifact's metadata
	// was inserted in it. It may be called again in another transaction
	// when the first rolled back.
	Commit(ctx context.Context, tx Tx) error
	// Done releases what staging kept outside the store once Commit's
	// transaction committed; the committed bytes stay.
	Done() error
	// Discard removes staged bytes whose metadata did not commit.
	Discard() error
}

// Blob is an artifact's bytes, positioned at their start; ReadAt and Seek
// serve range reads. The caller closes it.
type Blob interface {
	io.Reader
	io.ReaderAt
	io.Seeker
	io.Closer
}

// ArtifactChunkSize is the size of every chunk of an artifact kept in a
// database but its last, which holds the rest (1 to ArtifactChunkSize
// bytes); an empty artifact has no chunk.
const ArtifactChunkSize = 1 << 20

// MaxChunkedArtifactBytes is the most bytes one artifact may have where
// the bytes go into the database (64 chunks): the transaction that
// commits them writes them all. The scheduler stores far less of one
// (8 MiB and 4 KiB unless told otherwise).
const MaxChunkedArtifactBytes = 64 * ArtifactChunkSize

// ArtifactChunk is one chunk of an artifact's bytes: chunk Seq (from 0)
// of artifact Artifact.
type ArtifactChunk struct {
	Artifact string
	Seq      int64
	Data     []byte
}

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

func checkArtifactID(id string) error {
	if !validArtifactID(id) {
		return fmt.Errorf("storage: artifact id %q is not a plain identifier", id)
	}
	return nil
}

// ---- files ----

// FileBlobs keeps artifact bytes as files in dir (created owner-only),
// named by artifact id. A file is written and synced under its final name
// when it is staged, before its metadata commits: a committed artifact
// always has its file, and a file whose metadata never committed is
// invisible.
func FileBlobs(dir string) (Blobs, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("storage: create the artifact directory: %w", err)
	}
	return fileBlobs{dir: dir}, nil
}

type fileBlobs struct{ dir string }

func (b fileBlobs) path(id string) string { return filepath.Join(b.dir, id) }

// Stage writes r as the file of artifact id. An id whose file is already
// there (a committed artifact, or another stage) is ErrDuplicate and its
// file is left untouched: staging never replaces the bytes of an
// artifact, so a refused commit cannot take them with it.
func (b fileBlobs) Stage(id string, r io.Reader) (StagedBlob, error) {
	return b.stage(id, r, true)
}

// StageUnsynced is Stage without the directory's sync: the file's bytes
// are synced, its name becomes durable at the next SyncNames.
func (b fileBlobs) StageUnsynced(id string, r io.Reader) (StagedBlob, error) {
	return b.stage(id, r, false)
}

// SyncNames makes the names of the files staged so far durable.
func (b fileBlobs) SyncNames() error { return atomicfile.SyncDir(b.dir) }

func (b fileBlobs) stage(id string, r io.Reader, syncName bool) (StagedBlob, error) {
	if err := checkArtifactID(id); err != nil {
		return nil, err
	}
	opts := []atomicfile.Option{atomicfile.TempPrefix(".stage-")}
	if !syncName {
		opts = append(opts, atomicfile.NoDirSync())
	}
	h := sha256.New()
	n, err := atomicfile.WriteNewFrom(b.path(id), io.TeeReader(r, h), 0o600, opts...)
	if errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("%w: artifact %s already has its bytes; stage it under a new id", ErrDuplicate, id)
	}
	if err != nil {
		return nil, fmt.Errorf("storage: stage artifact: %w", err)
	}
	return &fileStage{path: b.path(id), size: n, sha256: hex.EncodeToString(h.Sum(nil))}, nil
}

func (b fileBlobs) Open(_ context.Context, a Artifact) (Blob, error) {
	if err := checkArtifactID(a.ID); err != nil {
		return nil, err
	}
	f, err := os.Open(b.path(a.ID))
	if err != nil {
		return nil, fmt.Errorf("storage: artifact %s has no bytes: %w", a.ID, err)
	}
	if fi, err := f.Stat(); err != nil || fi.Size() != a.Size {
		f.Close()
		return nil, fmt.Errorf("storage: the file of artifact %s does not hold the %d bytes its metadata names", a.ID, a.Size)
	}
	return f, nil
}

type fileStage struct {
	path   string
	size   int64
	sha256 string
}

func (s *fileStage) Size() int64    { return s.size }
func (s *fileStage) SHA256() string { return s.sha256 }

// Commit has nothing to write: the file is in place.
func (s *fileStage) Commit(context.Context, Tx) error { return nil }

func (s *fileStage) Done() error { return nil }

func (s *fileStage) Discard() error {
	err := os.Remove(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// ---- chunks ----

// ChunkReader reads the chunks of artifacts a database keeps.
type ChunkReader interface {
	// GetArtifactChunk returns chunk seq of artifact id, or ErrNotFound.
	GetArtifactChunk(ctx context.Context, id string, seq int64) ([]byte, error)
}

// spoolPrefix names the spool files ChunkBlobs keeps in its directory
// while bytes are on their way into the database.
const spoolPrefix = ".spool-"

// ChunkBlobs keeps artifact bytes in the database in chunks of
// ArtifactChunkSize, read through r. Staging spools the bytes to a file
// in dir (the daemon's own; spools left by an earlier process are removed
// here), and Commit writes them as chunks in the transaction that inserts
// the metadata: the artifact commits with all its bytes or not at all, and
// any daemon on the database reads it. An artifact above
// MaxChunkedArtifactBytes is refused at staging.
func ChunkBlobs(r ChunkReader, dir string) (Blobs, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("storage: create the artifact directory: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("storage: read the artifact directory: %w", err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), spoolPrefix) {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	return chunkBlobs{r: r, dir: dir}, nil
}

type chunkBlobs struct {
	r   ChunkReader
	dir string
}

func (b chunkBlobs) Stage(id string, r io.Reader) (_ StagedBlob, err error) {
	if err := checkArtifactID(id); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(b.dir, spoolPrefix+id+"-*")
	if err != nil {
		return nil, fmt.Errorf("storage: stage artifact: %w", err)
	}
	defer func() {
		f.Close()
		if err != nil {
			_ = os.Remove(f.Name())
		}
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(r, MaxChunkedArtifactBytes+1))
	if err != nil {
		return nil, fmt.Errorf("storage: stage artifact: %w", err)
	}
	if n > MaxChunkedArtifactBytes {
		return nil, fmt.Errorf("storage: artifact %s is larger than %d bytes, the most one artifact may hold in the database", id, MaxChunkedArtifactBytes)
	}
	return &chunkStage{id: id, spool: f.Name(), size: n, sha256: hex.EncodeToString(h.Sum(nil))}, nil
}

type chunkStage struct {
	id, spool string
	size      int64
	sha256    string
}

func (s *chunkStage) Size() int64    { return s.size }
func (s *chunkStage) SHA256() string { return s.sha256 }

// Commit writes the spool into tx one chunk at a time, hashing it again:
// a spool that no longer holds the staged bytes commits nothing.
func (s *chunkStage) Commit(ctx context.Context, tx Tx) error {
	f, err := os.Open(s.spool)
	if err != nil {
		return fmt.Errorf("storage: artifact %s lost its staged bytes: %w", s.id, err)
	}
	defer f.Close()
	h := sha256.New()
	buf := make([]byte, ArtifactChunkSize)
	var total int64
	for seq := int64(0); ; seq++ {
		n, err := io.ReadFull(f, buf)
		if n > 0 {
			h.Write(buf[:n])
			total += int64(n)
			if err := tx.InsertArtifactChunk(ctx, &ArtifactChunk{Artifact: s.id, Seq: seq, Data: buf[:n]}); err != nil {
				return err
			}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return fmt.Errorf("storage: read the staged bytes of artifact %s: %w", s.id, err)
		}
	}
	if total != s.size || hex.EncodeToString(h.Sum(nil)) != s.sha256 {
		return fmt.Errorf("storage: the staged bytes of artifact %s changed after staging", s.id)
	}
	return nil
}

func (s *chunkStage) Done() error { return s.Discard() }

func (s *chunkStage) Discard() error {
	err := os.Remove(s.spool)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

func (b chunkBlobs) Open(ctx context.Context, a Artifact) (Blob, error) {
	if err := checkArtifactID(a.ID); err != nil {
		return nil, err
	}
	return &chunkBlob{ctx: ctx, r: b.r, meta: a, cur: -1, h: sha256.New()}, nil
}

// chunkBlob reads an artifact's chunks as they are needed, keeping one.
// Every chunk must have the length the artifact's size gives it; a
// missing or short chunk is an error, never a shorter artifact. A read
// from the start to the end checks the bytes' SHA-256 too.
type chunkBlob struct {
	ctx  context.Context
	r    ChunkReader
	meta Artifact
	pos  int64
	// cur is the chunk in data (-1: none).
	cur  int64
	data []byte
	// h hashes what Read returned from the start, while it reads on in
	// order (hashed bytes so far; -1 once a seek broke the order).
	h      hash.Hash
	hashed int64
}

func (b *chunkBlob) chunk(seq int64) ([]byte, error) {
	if seq == b.cur {
		return b.data, nil
	}
	want := min(int64(ArtifactChunkSize), b.meta.Size-seq*ArtifactChunkSize)
	data, err := b.r.GetArtifactChunk(b.ctx, b.meta.ID, seq)
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("storage: artifact %s is missing chunk %d of its bytes", b.meta.ID, seq)
	}
	if err != nil {
		return nil, err
	}
	if int64(len(data)) != want {
		return nil, fmt.Errorf("storage: chunk %d of artifact %s holds %d bytes, want %d", seq, b.meta.ID, len(data), want)
	}
	b.cur, b.data = seq, data
	return data, nil
}

func (b *chunkBlob) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("storage: read artifact %s at a negative offset", b.meta.ID)
	}
	n := 0
	for n < len(p) {
		at := off + int64(n)
		if at >= b.meta.Size {
			return n, io.EOF
		}
		data, err := b.chunk(at / ArtifactChunkSize)
		if err != nil {
			return n, err
		}
		n += copy(p[n:], data[at%ArtifactChunkSize:])
	}
	return n, nil
}

func (b *chunkBlob) Read(p []byte) (int, error) {
	if b.pos >= b.meta.Size {
		return 0, b.verify()
	}
	p = p[:min(int64(len(p)), b.meta.Size-b.pos)]
	n, err := b.ReadAt(p, b.pos)
	if b.hashed == b.pos {
		b.h.Write(p[:n])
		b.hashed += int64(n)
	}
	b.pos += int64(n)
	if err == io.EOF {
		err = nil
	}
	if err == nil && b.pos >= b.meta.Size {
		return n, b.verify()
	}
	return n, err
}

// verify ends a read at the end: io.EOF, or an error when a read in order
// from the start hashed other bytes than the metadata names.
func (b *chunkBlob) verify() error {
	if b.hashed == b.meta.Size && hex.EncodeToString(b.h.Sum(nil)) != b.meta.SHA256 {
		return fmt.Errorf("storage: the bytes of artifact %s do not match their SHA-256", b.meta.ID)
	}
	return io.EOF
}

func (b *chunkBlob) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += b.pos
	case io.SeekEnd:
		offset += b.meta.Size
	default:
		return 0, errors.New("storage: seek: invalid whence")
	}
	if offset < 0 {
		return 0, errors.New("storage: seek: negative position")
	}
	if offset != b.hashed {
		b.hashed = -1
	}
	b.pos = offset
	return offset, nil
}

func (b *chunkBlob) Close() error {
	b.data, b.cur = nil, -1
	return nil
}
