package reaper

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Descendants finds a whole tree below a process: a child, and the
// grandchildren whose parent is still alive; Children, from the tasks'
// children files, agrees with a scan of all of /proc.
func TestDescendantsFindTheWholeTree(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("/bin/sh", "-c", `sleep 300 & echo $! > `+dir+`/a; sleep 300 & echo $! > `+dir+`/b; wait`)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	var want []int
	deadline := time.Now().Add(30 * time.Second)
	for _, name := range []string{"a", "b"} {
		for {
			b, _ := os.ReadFile(dir + "/" + name)
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				want = append(want, pid)
				t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the shell never wrote %s", name)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	self := os.Getpid()
	if got := Children(self); !slices.Contains(got, cmd.Process.Pid) || slices.Contains(got, want[0]) {
		t.Errorf("Children(self) = %v, want the shell %d and not its children %v", got, cmd.Process.Pid, want)
	}
	kids := Children(cmd.Process.Pid)
	slices.Sort(kids)
	scanned := scanChildren(cmd.Process.Pid)
	slices.Sort(scanned)
	slices.Sort(want)
	if !slices.Equal(kids, want) || !slices.Equal(scanned, want) {
		t.Errorf("children of the shell: %v from its tasks, %v from /proc; want %v", kids, scanned, want)
	}
	all := Descendants(self)
	for _, pid := range append([]int{cmd.Process.Pid}, want...) {
		if !slices.Contains(all, pid) {
			t.Errorf("Descendants(self) = %v misses %d", all, pid)
		}
	}
	if slices.Contains(all, self) {
		t.Errorf("Descendants(self) = %v lists the process itself", all)
	}
}
