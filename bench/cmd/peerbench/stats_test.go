package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// A command name with spaces and a parenthesis does not shift the fields.
func TestParseCPU(t *testing.T) {
	stat := "42 (a b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 130 0 0 20 0 3 0 5 0 0"
	got, err := parseCPU(stat)
	if err != nil {
		t.Fatal(err)
	}
	if want := 3800 * time.Millisecond; got != want {
		t.Errorf("parseCPU = %v, want %v", got, want)
	}
	if _, err := cpuTime(os.Getpid()); err != nil {
		t.Errorf("cpuTime of this process: %v", err)
	}
	if n, err := threads(os.Getpid()); err != nil || n < 1 {
		t.Errorf("threads of this process: %d %v", n, err)
	}
}

// strace -c's summary, with and without an errors column.
func TestStraceCalls(t *testing.T) {
	summary := `% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 97.51    0.254093         141      1795           fsync
  2.49    0.006499          65       100         3 fdatasync
------ ----------- ----------- --------- --------- ----------------
100.00    0.260592         136      1895         3 total
`
	path := filepath.Join(t.TempDir(), "s.txt")
	if err := os.WriteFile(path, []byte(summary), 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := straceCalls(path)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1895 {
		t.Errorf("straceCalls = %d, want 1895", n)
	}
}

// A descendant that has used CPU is counted for its ancestors, and for
// nobody else.
func TestDescendantsCPU(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc here")
	}
	// A grandchild: sh runs the busy sh as its own child.
	cmd := exec.Command("sh", "-c", `sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; exec sleep 60'; :`)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for descendantsCPU(os.Getpid()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the busy grandchild's CPU was never counted for its grandparent")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := descendantsCPU(1 << 30); got != 0 {
		t.Fatalf("a pid no process has was given %v of descendants' CPU", got)
	}
}
