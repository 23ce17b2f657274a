package storage

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A stage whose name is not yet synced is readable and commits like any
// other once SyncNames has run; Stage is StageUnsynced and SyncNames.
func TestStageUnsyncedThenSyncNames(t *testing.T) {
	dir := t.TempDir()
	blobs, err := FileBlobs(dir)
	if err != nil {
		t.Fatal(err)
	}
	a := &Artifacts{blobs: blobs}
	st, err := a.StageUnsynced("art_1", strings.NewReader("log"))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SyncNames(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, st.ID())); err != nil || string(b) != "log" {
		t.Fatalf("staged bytes %q, %v", b, err)
	}
	if _, err := a.StageUnsynced("art_1", strings.NewReader("other")); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("a second stage of one id: %v, want ErrDuplicate", err)
	}
	os.RemoveAll(dir)
	if err := a.SyncNames(); err == nil {
		t.Fatal("SyncNames of a missing directory succeeded")
	}
}
