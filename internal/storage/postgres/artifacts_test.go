package postgres_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/storage/storagetest"
)

// pattern is n bytes that differ from position to position.
func pattern(n int) []byte {
	b := make([]byte, n)
	x := uint64(88172645463325252)
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x >> 32)
	}
	return b
}

// spools lists what an artifact directory holds.
func spools(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// TestArtifactsAcrossDaemons: an artifact of several chunks written
// through one store is read byte for byte through another store on the
// same database (each with an artifact directory of its own, which holds
// nothing once the write is done), whole and in a range across a chunk's
// end.
func TestArtifactsAcrossDaemons(t *testing.T) {
	_, _, ss := daemons(t, 2)
	ctx := context.Background()
	if _, err := storagetest.SeedExecution(ctx, ss[0], "wrk_1", "exe_1"); err != nil {
		t.Fatal(err)
	}
	dirA, dirB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	a, err := storage.NewArtifacts(ss[0], dirA)
	if err != nil {
		t.Fatal(err)
	}
	b, err := storage.NewArtifacts(ss[1], dirB)
	if err != nil {
		t.Fatal(err)
	}
	body := pattern(5*storage.ArtifactChunkSize + 4321)
	sum := sha256.Sum256(body)
	meta, err := a.Put(ctx, storage.Artifact{ID: "art_big", Execution: "exe_1", Work: "wrk_1", Name: "transcript", MediaType: "application/x-ndjson", CreatedAt: storagetest.T0}, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if meta.SHA256 != hex.EncodeToString(sum[:]) || meta.Size != int64(len(body)) {
		t.Fatalf("metadata = %+v", meta)
	}
	if left := spools(t, dirA); len(left) != 0 {
		t.Errorf("the writer's artifact directory holds %v after the write", left)
	}
	got, f, err := b.Open(ctx, "art_big")
	if err != nil {
		t.Fatalf("the other store opens the artifact: %v", err)
	}
	defer f.Close()
	all, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	if got != meta || !bytes.Equal(all, body) {
		t.Fatalf("the other store reads %+v and %d bytes (equal: %v), want %+v and the %d written", got, len(all), bytes.Equal(all, body), meta, len(body))
	}
	part := make([]byte, 100)
	off := int64(3*storage.ArtifactChunkSize - 50)
	if _, err := f.ReadAt(part, off); err != nil || !bytes.Equal(part, body[off:off+100]) {
		t.Fatalf("a range across a chunk's end: %v, equal %v", err, bytes.Equal(part, body[off:off+100]))
	}
	for seq := range int64(6) {
		if _, err := ss[1].GetArtifactChunk(ctx, "art_big", seq); err != nil {
			t.Errorf("chunk %d: %v", seq, err)
		}
	}
	if _, err := ss[1].GetArtifactChunk(ctx, "art_big", 6); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("a seventh chunk: %v, want ErrNotFound", err)
	}
}

// cancelAfter cancels its context once n chunks were written in it: the
// write is interrupted halfway, its next statement failing.
type cancelAfter struct {
	storage.Tx
	n      int
	cancel context.CancelFunc
}

func (t *cancelAfter) InsertArtifactChunk(ctx context.Context, c *storage.ArtifactChunk) error {
	if t.n == 0 {
		t.cancel()
	}
	t.n--
	return t.Tx.InsertArtifactChunk(ctx, c)
}

// TestInterruptedArtifactWriteLeavesNothing: a write interrupted after
// some of its chunks (its context cancelled mid-commit) leaves no artifact
// and no chunk for any store to see, and its spool is discarded; an
// artifact above the cap is refused at staging and leaves no spool.
func TestInterruptedArtifactWriteLeavesNothing(t *testing.T) {
	_, _, ss := daemons(t, 2)
	ctx := context.Background()
	if _, err := storagetest.SeedExecution(ctx, ss[0], "wrk_1", "exe_1"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	a, err := storage.NewArtifacts(ss[0], dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := a.Stage("art_cut", bytes.NewReader(pattern(3*storage.ArtifactChunkSize+1)))
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	err = ss[0].WithTx(cctx, func(tx storage.Tx) error {
		_, err := st.Commit(cctx, &cancelAfter{Tx: tx, n: 2, cancel: cancel}, storage.Artifact{Execution: "exe_1", Work: "wrk_1", Name: "log", MediaType: "text/plain", CreatedAt: storagetest.T0})
		return err
	})
	if err == nil {
		t.Fatal("a write whose context was cancelled halfway committed")
	}
	if err := st.Discard(); err != nil {
		t.Fatal(err)
	}
	for i, s := range ss {
		if _, err := s.GetArtifact(ctx, "art_cut"); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("store %d sees the interrupted artifact: %v", i, err)
		}
		if _, err := s.GetArtifactChunk(ctx, "art_cut", 0); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("store %d sees a chunk of the interrupted artifact: %v", i, err)
		}
	}
	if left := spools(t, dir); len(left) != 0 {
		t.Errorf("the discarded write left %v", left)
	}

	zeros := io.LimitReader(zeroReader{}, storage.MaxChunkedArtifactBytes+1)
	if _, err := a.Stage("art_huge", zeros); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("an artifact above the cap: %v, want a refusal", err)
	}
	if left := spools(t, dir); len(left) != 0 {
		t.Errorf("the refused artifact left %v", left)
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestLeftoverSpoolsAreRemovedAtOpen: the spool of a write that a crash
// interrupted is removed when the artifact store is opened again.
func TestLeftoverSpoolsAreRemovedAtOpen(t *testing.T) {
	_, _, ss := daemons(t, 1)
	dir := t.TempDir()
	a, err := storage.NewArtifacts(ss[0], dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Stage("art_crash", strings.NewReader("staged, never committed")); err != nil {
		t.Fatal(err)
	}
	if left := spools(t, dir); len(left) != 1 {
		t.Fatalf("the stage left %v, want its one spool", left)
	}
	if _, err := storage.NewArtifacts(ss[0], dir); err != nil {
		t.Fatal(err)
	}
	if left := spools(t, dir); len(left) != 0 {
		t.Errorf("after opening again the directory holds %v", left)
	}
}
