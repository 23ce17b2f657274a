package daemon

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// sameBytes reports whether two files hold the same bytes.
func sameBytes(a, b string) (bool, error) {
	x, err := os.ReadFile(a)
	if err != nil {
		return false, err
	}
	y, err := os.ReadFile(b)
	if err != nil {
		return false, err
	}
	return bytes.Equal(x, y), nil
}

// bin/os is a copy that outlasts the binary it came from, written only
// when it differs, and replaces whatever an earlier release left there.
func TestInstallOS(t *testing.T) {
	state := t.TempDir()
	build := t.TempDir() // stands for go run's temporary build directory
	exe := filepath.Join(build, "open-conduit")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\necho one\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(state, BinDir, OSName)
	install := func(wantWrote bool) os.FileInfo {
		t.Helper()
		dir, wrote, err := installOS(state, exe)
		if err != nil {
			t.Fatal(err)
		}
		if dir != filepath.Join(state, BinDir) || wrote != wantWrote {
			t.Fatalf("installOS = %s, wrote %v; want %s, wrote %v", dir, wrote, filepath.Join(state, BinDir), wantWrote)
		}
		fi, err := os.Lstat(target)
		if err != nil {
			t.Fatal(err)
		}
		if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o755 {
			t.Fatalf("bin/os has mode %v, want a regular file of 0755", fi.Mode())
		}
		if same, err := sameBytes(target, exe); err != nil || !same {
			t.Fatalf("bin/os is not a copy of the binary (%v)", err)
		}
		return fi
	}

	first := install(true)
	// Unchanged: nothing is written (the same file stays in place).
	if again := install(false); !os.SameFile(first, again) {
		t.Fatal("an unchanged binary was copied again")
	}
	// A new build replaces it.
	if err := os.WriteFile(exe, []byte("#!/bin/sh\necho two\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	if changed := install(true); os.SameFile(first, changed) {
		t.Fatal("a changed binary was written in place instead of renamed over")
	}
	// A copy whose mode was changed is written again.
	if err := os.Chmod(target, 0o700); err != nil {
		t.Fatal(err)
	}
	install(true)
	// The symlink an earlier release made is replaced by a copy.
	if err := os.Remove(target); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(exe, target); err != nil {
		t.Fatal(err)
	}
	install(true)
	// The copy lasts when the build directory goes.
	want, _ := os.ReadFile(exe)
	if err := os.RemoveAll(build); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(target); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("bin/os after the build directory went: %q, %v", got, err)
	}
	// No temporary file is left beside it.
	if ents, _ := os.ReadDir(filepath.Join(state, BinDir)); len(ents) != 1 {
		t.Fatalf("bin/ holds %d entries, want only os", len(ents))
	}
}
