package storagetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/open-conduit/open-conduit/internal/storage"
)

func artifactMetadata(ctx context.Context, s storage.Store) error {
	e, err := SeedExecution(ctx, s, "wrk_1", "exe_1")
	if err != nil {
		return err
	}
	err = s.WithTx(ctx, func(tx storage.Tx) error {
		for i := range 3 {
			a := &storage.Artifact{ID: fmt.Sprintf("art_%d", i), Execution: e.ID, Work: "wrk_1", Name: "log", MediaType: "text/plain", Size: int64(i), SHA256: "00", CreatedAt: at(i)}
			if err := tx.InsertArtifact(ctx, a); err != nil {
				return err
			}
		}
		return wantErr(tx.InsertArtifact(ctx, &storage.Artifact{ID: "art_0", Execution: e.ID, Work: "wrk_1", Name: "x", MediaType: "x", CreatedAt: T0}),
			storage.ErrDuplicate, "a second artifact with the same id")
	})
	if err != nil {
		return err
	}
	rows, err := s.ListArtifacts(ctx, &storage.ListArtifactsParams{Execution: e.ID, Page: storage.Page{After: &storage.Position{CreatedAt: at(0), ID: "art_0"}}})
	if err != nil {
		return err
	}
	a, err := s.GetArtifact(ctx, "art_2")
	_, missing := s.GetArtifact(ctx, "art_none")
	return first(err,
		want(len(rows) == 2 && rows[0].ID == "art_1", "artifacts after art_0 = %+v", rows),
		want(a.Size == 2 && a.Name == "log" && a.MediaType == "text/plain" && a.SHA256 == "00" && a.Execution == e.ID && a.Work == "wrk_1" && a.CreatedAt.Equal(at(2)), "artifact = %+v", a),
		wantErr(missing, storage.ErrNotFound, "a missing artifact"),
	)
}

func artifactCases() []Case {
	return []Case{
		{Name: "artifact_metadata", Run: plain(artifactMetadata), Control: artifactListIgnoresAfter},
		{Name: "artifact_list_filters", Run: plain(artifactListFilters), Control: artifactListIgnoresWork},
		{Name: "artifact_files_and_metadata", Run: artifactFilesAndMetadata, Control: artifactForgetsSize},
		{Name: "artifact_bytes_whole", Run: artifactBytesWhole, Control: artifactLosesLastChunk},
		{Name: "artifact_commit_again", Run: artifactCommitAgain, Control: artifactMetadataWithoutBytes},
	}
}

func artifactListFilters(ctx context.Context, s storage.Store) error {
	for _, w := range []string{"1", "2"} {
		if _, err := SeedExecution(ctx, s, "wrk_"+w, "exe_"+w); err != nil {
			return err
		}
	}
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		for i, exe := range []string{"1", "2", "1", "2"} {
			a := &storage.Artifact{ID: fmt.Sprintf("art_%d", i), Execution: "exe_" + exe, Work: "wrk_" + exe, Name: "out", MediaType: "application/json", Size: 1, SHA256: "00", CreatedAt: at(i)}
			if err := tx.InsertArtifact(ctx, a); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	checks := []struct {
		p    storage.ListArtifactsParams
		want string
	}{
		{storage.ListArtifactsParams{}, "[art_0 art_1 art_2 art_3]"},
		{storage.ListArtifactsParams{Work: "wrk_2"}, "[art_1 art_3]"},
		{storage.ListArtifactsParams{Execution: "exe_1"}, "[art_0 art_2]"},
		{storage.ListArtifactsParams{Work: "wrk_1", Execution: "exe_2"}, "[]"},
		{storage.ListArtifactsParams{Work: "wrk_2", Page: storage.Page{Desc: true, Limit: 1}}, "[art_3]"},
		{storage.ListArtifactsParams{Page: storage.Page{Until: &storage.Position{CreatedAt: at(2), ID: "art_2"}, Limit: 2}}, "[art_0 art_1]"},
	}
	for _, c := range checks {
		as, err := s.ListArtifacts(ctx, &c.p)
		if err != nil {
			return err
		}
		if got := list(as, func(a storage.Artifact) string { return a.ID }); got != c.want {
			return fmt.Errorf("ListArtifacts(%+v) = %s, want %s", c.p, got, c.want)
		}
	}
	return nil
}

// artifactFilesAndMetadata: artifacts are bytes (where the engine keeps
// them) plus the metadata the store keeps, through storage.Artifacts: the
// metadata names the bytes' size and digest, both survive a reopen, and
// bytes whose metadata never committed stay invisible and leave nothing
// in the artifact directory.
func artifactFilesAndMetadata(ctx context.Context, env *Env) error {
	if _, err := SeedExecution(ctx, env.Store, "wrk_1", "exe_1"); err != nil {
		return err
	}
	dir := filepath.Join(env.Dir, "artifacts")
	arts, err := storage.NewArtifacts(env.Store, dir)
	if err != nil {
		return err
	}
	body := strings.Repeat("line of log\n", 500)
	sum := sha256.Sum256([]byte(body))
	meta, err := arts.Put(ctx, storage.Artifact{ID: "art_1", Execution: "exe_1", Work: "wrk_1", Name: "log", MediaType: "text/plain; charset=utf-8", CreatedAt: at(3)}, strings.NewReader(body))
	if err != nil {
		return err
	}
	if meta.Size != int64(len(body)) || meta.SHA256 != hex.EncodeToString(sum[:]) {
		return fmt.Errorf("stored metadata = %+v, want size %d and the bytes' SHA-256", meta, len(body))
	}
	// Bytes staged whose metadata rolls back are invisible, and discarded.
	st, err := arts.Stage("art_2", strings.NewReader("never committed"))
	if err != nil {
		return err
	}
	boom := errors.New("roll back")
	if err := env.Store.WithTx(ctx, func(tx storage.Tx) error {
		if _, err := st.Commit(ctx, tx, storage.Artifact{Execution: "exe_1", Work: "wrk_1", Name: "x", MediaType: "text/plain", CreatedAt: at(4)}); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		return fmt.Errorf("a rolled-back commit: %v", err)
	}
	if err := st.Discard(); err != nil {
		return err
	}
	if _, err := arts.Put(ctx, storage.Artifact{ID: "../escape", Execution: "exe_1", Work: "wrk_1", Name: "x", MediaType: "text/plain", CreatedAt: at(5)}, strings.NewReader("x")); err == nil {
		return errors.New("an artifact id with a path was accepted")
	}

	if err := env.Reopen(); err != nil {
		return err
	}
	arts, err = storage.NewArtifacts(env.Store, dir)
	if err != nil {
		return err
	}
	got, f, err := arts.Open(ctx, "art_1")
	if err != nil {
		return fmt.Errorf("an artifact after a reopen: %w", err)
	}
	defer f.Close()
	part := make([]byte, 11)
	if _, err := f.ReadAt(part, 12); err != nil {
		return err
	}
	all, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	if !same(got, meta) || string(part) != "line of log" || string(all) != body || int64(len(all)) != got.Size {
		return fmt.Errorf("after a reopen: metadata %+v (stored %+v), range %q, %d bytes", got, meta, part, len(all))
	}
	_, _, unseen := arts.Open(ctx, "art_2")
	_, unseenMeta := env.Store.GetArtifact(ctx, "art_2")
	_, statErr := os.Stat(filepath.Join(dir, "art_2"))
	left, err := leftFor(dir, "art_2")
	return first(err,
		wantErr(unseen, storage.ErrNotFound, "opening an artifact whose metadata rolled back"),
		wantErr(unseenMeta, storage.ErrNotFound, "the metadata that rolled back"),
		want(errors.Is(statErr, os.ErrNotExist), "the discarded bytes remain: %v", statErr),
		want(len(left) == 0, "the discarded bytes left %v in the artifact directory", left),
	)
}

// leftFor lists the entries of dir whose names mention id.
func leftFor(dir, id string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if strings.Contains(e.Name(), id) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// bigBody is n bytes that differ from position to position (so a piece
// read from the wrong place never matches), several chunks' worth.
func bigBody(n int) []byte {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// artifactBytesWhole: an artifact of several chunks' worth of bytes (and
// an empty one) reads back byte for byte after a reopen, whole, in a range
// across a chunk's end and from a seek near its end.
func artifactBytesWhole(ctx context.Context, env *Env) error {
	if _, err := SeedExecution(ctx, env.Store, "wrk_1", "exe_1"); err != nil {
		return err
	}
	dir := filepath.Join(env.Dir, "artifacts")
	arts, err := storage.NewArtifacts(env.Store, dir)
	if err != nil {
		return err
	}
	body := bigBody(2*storage.ArtifactChunkSize + 12345)
	sum := sha256.Sum256(body)
	meta, err := arts.Put(ctx, storage.Artifact{ID: "art_big", Execution: "exe_1", Work: "wrk_1", Name: "transcript", MediaType: "application/octet-stream", CreatedAt: at(1)}, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if meta.Size != int64(len(body)) || meta.SHA256 != hex.EncodeToString(sum[:]) {
		return fmt.Errorf("stored metadata = %+v, want size %d and the bytes' SHA-256", meta, len(body))
	}
	if _, err := arts.Put(ctx, storage.Artifact{ID: "art_empty", Execution: "exe_1", Work: "wrk_1", Name: "log", MediaType: "text/plain", CreatedAt: at(2)}, strings.NewReader("")); err != nil {
		return fmt.Errorf("an empty artifact: %w", err)
	}
	if err := env.Reopen(); err != nil {
		return err
	}
	if arts, err = storage.NewArtifacts(env.Store, dir); err != nil {
		return err
	}
	got, f, err := arts.Open(ctx, "art_big")
	if err != nil {
		return fmt.Errorf("an artifact after a reopen: %w", err)
	}
	defer f.Close()
	all, err := io.ReadAll(f)
	if err != nil {
		return fmt.Errorf("reading the whole artifact: %w", err)
	}
	edge := make([]byte, 10)
	off := int64(storage.ArtifactChunkSize - 5)
	if _, err := f.ReadAt(edge, off); err != nil {
		return fmt.Errorf("a range across a chunk's end: %w", err)
	}
	if _, err := f.Seek(-3, io.SeekEnd); err != nil {
		return err
	}
	tail, err := io.ReadAll(f)
	if err != nil {
		return fmt.Errorf("reading after a seek: %w", err)
	}
	_, e, err := arts.Open(ctx, "art_empty")
	if err != nil {
		return fmt.Errorf("an empty artifact after a reopen: %w", err)
	}
	defer e.Close()
	empty, err := io.ReadAll(e)
	return first(err,
		want(same(got, meta), "metadata after a reopen = %+v, stored %+v", got, meta),
		want(bytes.Equal(all, body), "read back %d bytes that differ from the %d stored", len(all), len(body)),
		want(bytes.Equal(edge, body[off:off+10]), "the range across a chunk's end = %x, want %x", edge, body[off:off+10]),
		want(bytes.Equal(tail, body[len(body)-3:]), "the last 3 bytes = %x, want %x", tail, body[len(body)-3:]),
		want(len(empty) == 0, "the empty artifact reads %d bytes", len(empty)),
	)
}

// artifactCommitAgain: bytes staged once and committed in a transaction
// that rolled back are invisible, and commit whole in the next one (the
// scheduler commits a round's results again one by one when their shared
// transaction failed).
func artifactCommitAgain(ctx context.Context, env *Env) error {
	if _, err := SeedExecution(ctx, env.Store, "wrk_1", "exe_1"); err != nil {
		return err
	}
	arts, err := storage.NewArtifacts(env.Store, filepath.Join(env.Dir, "artifacts"))
	if err != nil {
		return err
	}
	body := bigBody(storage.ArtifactChunkSize + 777)
	st, err := arts.Stage("art_1", bytes.NewReader(body))
	if err != nil {
		return err
	}
	meta := storage.Artifact{Execution: "exe_1", Work: "wrk_1", Name: "log", MediaType: "text/plain", CreatedAt: at(1)}
	boom := errors.New("roll back")
	if err := env.Store.WithTx(ctx, func(tx storage.Tx) error {
		if _, err := st.Commit(ctx, tx, meta); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		return fmt.Errorf("a rolled-back commit: %v", err)
	}
	_, _, unseen := arts.Open(ctx, "art_1")
	if err := wantErr(unseen, storage.ErrNotFound, "an artifact whose commit rolled back"); err != nil {
		return err
	}
	if err := env.Store.WithTx(ctx, func(tx storage.Tx) error {
		_, err := st.Commit(ctx, tx, meta)
		return err
	}); err != nil {
		return fmt.Errorf("committing again: %w", err)
	}
	if err := st.Done(); err != nil {
		return err
	}
	_, f, err := arts.Open(ctx, "art_1")
	if err != nil {
		return err
	}
	defer f.Close()
	all, err := io.ReadAll(f)
	return first(err, want(bytes.Equal(all, body), "committed again, the artifact reads %d bytes that differ from the %d staged", len(all), len(body)))
}
