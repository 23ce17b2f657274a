package unixsock

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

func TestBindIsOwnerOnlyAndRestoresUmask(t *testing.T) {
	dir, err := os.MkdirTemp("", "ocsock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	before := syscall.Umask(0o022)
	syscall.Umask(before)

	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			path := filepath.Join(dir, "s"+string(rune('a'+i)))
			ln, err := Bind(path)
			if err != nil {
				t.Error(err)
				return
			}
			defer ln.Close()
			fi, err := os.Stat(path)
			if err != nil {
				t.Error(err)
				return
			}
			if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
				t.Errorf("%s: mode %v, want a 0600 socket", path, fi.Mode())
			}
		}(i)
	}
	wg.Wait()
	after := syscall.Umask(before)
	if after != before {
		t.Fatalf("umask is %o after the binds, was %o", after, before)
	}
}

func TestBindRefusesAnOccupiedPath(t *testing.T) {
	dir, err := os.MkdirTemp("", "ocsock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "s")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if ln, err := Bind(path); err == nil {
		ln.Close()
		t.Fatal("Bind over an existing file succeeded")
	}
}
