package atomicfile

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// entries lists the names in dir.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode()
}

func TestWriteFileContentAndMode(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	for _, perm := range []fs.FileMode{0o600, 0o640, 0o444} {
		dir := t.TempDir()
		path := filepath.Join(dir, "f")
		if err := WriteFile(path, []byte("one\n"), perm); err != nil {
			t.Fatal(err)
		}
		// A second write replaces the file, with the mode it asks for.
		if err := os.Chmod(path, 0o666); err != nil {
			t.Fatal(err)
		}
		if err := WriteFile(path, []byte("two\n"), perm); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(path); string(got) != "two\n" {
			t.Errorf("content %q", got)
		}
		if got := mode(t, path); got != perm {
			t.Errorf("mode %v, want %v (the umask must not narrow it, an older file must not widen it)", got, perm)
		}
		if names := entries(t, dir); len(names) != 1 {
			t.Errorf("directory holds %v, want only the file", names)
		}
	}
}

func TestWriteFileReplacesByRename(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := WriteFile(path, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A reader holding the old file keeps reading the old bytes: the new
	// file is a new inode, not the old one rewritten.
	held, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := WriteFile(path, []byte("new\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(held)
	if string(got) != "old\n" {
		t.Errorf("the held old file reads %q: it was rewritten in place", got)
	}
}

func TestWriteFromCountsAndPrefix(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	n, err := WriteFrom(path, strings.NewReader("twelve bytes"), 0o600, TempPrefix(".mine-"))
	if err != nil || n != 12 {
		t.Fatalf("WriteFrom = %d, %v", n, err)
	}
	if got, _ := os.ReadFile(path); string(got) != "twelve bytes" {
		t.Errorf("content %q", got)
	}
}

// failingReader yields some bytes, then fails.
type failingReader struct{ done bool }

var errRead = errors.New("the source failed")

func (r *failingReader) Read(p []byte) (int, error) {
	if r.done {
		return 0, errRead
	}
	r.done = true
	return copy(p, "partial"), nil
}

func TestFailedWriteLeavesTargetAndNoTemporary(t *testing.T) {
	for name, prefix := range map[string]string{"default prefix": "", "own prefix": ".mine-"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "f")
			if err := os.WriteFile(path, []byte("before\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			var opts []Option
			if prefix != "" {
				opts = append(opts, TempPrefix(prefix))
			}
			_, err := WriteFrom(path, &failingReader{}, 0o644, opts...)
			if !errors.Is(err, errRead) {
				t.Fatalf("WriteFrom over a failing reader = %v", err)
			}
			if got, _ := os.ReadFile(path); string(got) != "before\n" {
				t.Errorf("the target reads %q after a failed write", got)
			}
			if got := mode(t, path); got != 0o600 {
				t.Errorf("the target's mode became %v", got)
			}
			if names := entries(t, dir); len(names) != 1 || names[0] != "f" {
				t.Errorf("directory holds %v after a failed write, want only f", names)
			}
		})
	}
}

func TestFailedRenameLeavesNoTemporary(t *testing.T) {
	dir := t.TempDir()
	// The target is a non-empty directory: the rename cannot replace it.
	path := filepath.Join(dir, "d")
	if err := os.MkdirAll(filepath.Join(path, "inside"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("x"), 0o600); err == nil {
		t.Fatal("a write over a directory succeeded")
	}
	if names := entries(t, dir); len(names) != 1 || names[0] != "d" {
		t.Errorf("directory holds %v, want only d", names)
	}
	if st, err := os.Stat(filepath.Join(path, "inside")); err != nil || !st.IsDir() {
		t.Errorf("the target was disturbed: %v", err)
	}
}

func TestFailedCreateReturnsError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "f")
	if err := WriteFile(path, []byte("x"), 0o600); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("WriteFile into a missing directory = %v", err)
	}
}

func TestWriteNewFirstWriterWins(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "stop")
	if err := WriteNew(path, []byte("cancel\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteNew(path, []byte("deadline\n"), 0o600); !errors.Is(err, fs.ErrExist) {
		t.Errorf("the second WriteNew = %v, want fs.ErrExist", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "cancel\n" {
		t.Errorf("content %q, want the first writer's", got)
	}
	if got := mode(t, path); got != 0o600 {
		t.Errorf("mode %v", got)
	}
	if names := entries(t, dir); len(names) != 1 {
		t.Errorf("directory holds %v, want only the file", names)
	}
}

// WriteNewFrom streams like WriteFrom and wins like WriteNew: the bytes it
// counts are the file's, and a second writer leaves the first's untouched.
func TestWriteNewFromFirstWriterWins(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "art_1")
	n, err := WriteNewFrom(path, strings.NewReader("first bytes"), 0o600)
	if err != nil || n != int64(len("first bytes")) {
		t.Fatalf("WriteNewFrom = %d, %v", n, err)
	}
	if _, err := WriteNewFrom(path, strings.NewReader("second"), 0o600); !errors.Is(err, fs.ErrExist) {
		t.Errorf("the second WriteNewFrom = %v, want fs.ErrExist", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "first bytes" {
		t.Errorf("content %q, want the first writer's", got)
	}
	if names := entries(t, dir); len(names) != 1 {
		t.Errorf("directory holds %v, want only the file", names)
	}
}

func TestSymlinkReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "os")
	for _, target := range []string{"/first/binary", "/second/binary"} {
		if err := Symlink(target, path); err != nil {
			t.Fatal(err)
		}
		if got, err := os.Readlink(path); err != nil || got != target {
			t.Errorf("link = %q, %v; want %q", got, err, target)
		}
	}
	if names := entries(t, dir); len(names) != 1 {
		t.Errorf("directory holds %v, want only the link", names)
	}
	// A regular file in the way is replaced too.
	file := filepath.Join(dir, "plain")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Symlink("/third", file); err != nil {
		t.Fatal(err)
	}
	if mode(t, file)&fs.ModeSymlink == 0 {
		t.Error("the file was not replaced by a link")
	}
}

func TestLargeContent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big")
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	if err := WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, data) {
		t.Errorf("read back %d bytes, want %d", len(got), len(data))
	}
}

// NoSync writes the same whole file with its mode and leaves no temporary,
// for WriteFile and WriteNew alike.
func TestNoSyncWritesTheWholeFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	for _, content := range []string{"one\n", "two\n"} {
		if err := WriteFile(path, []byte(content), 0o600, NoSync()); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != content {
			t.Fatalf("read %q, %v; want %q", b, err, content)
		}
	}
	if err := WriteNew(filepath.Join(dir, "g"), []byte("new\n"), 0o640, NoSync()); err != nil {
		t.Fatal(err)
	}
	if err := WriteNew(filepath.Join(dir, "g"), []byte("again\n"), 0o640, NoSync()); !errors.Is(err, fs.ErrExist) {
		t.Errorf("a second WriteNew = %v, want ErrExist", err)
	}
	if m := mode(t, path).Perm(); m != 0o600 {
		t.Errorf("mode %04o, want 0600", m)
	}
	if m := mode(t, filepath.Join(dir, "g")).Perm(); m != 0o640 {
		t.Errorf("mode %04o, want 0640", m)
	}
	if got := entries(t, dir); len(got) != 2 {
		t.Errorf("the directory holds %v, want f and g only", got)
	}
}

// NoDirSync still makes the file whole under its name, first writer
// winning; SyncDir syncs a directory and fails for one that is gone.
func TestNoDirSyncAndSyncDir(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a")
	if _, err := WriteNewFrom(path, strings.NewReader("bytes"), 0o600, NoDirSync()); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteNewFrom(path, strings.NewReader("other"), 0o600, NoDirSync()); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second writer: %v, want ErrExist", err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "bytes" {
		t.Fatalf("file %q, %v", b, err)
	}
	if err := SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	if err := SyncDir(filepath.Join(dir, "gone")); err == nil {
		t.Fatal("SyncDir of a missing directory succeeded")
	}
}
