package proc

import (
	"os"
	"os/exec"
	"testing"
)

func TestParseProcStat(t *testing.T) {
	// The command name may hold spaces and parentheses.
	line := "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 100\n"
	st, err := parseProcStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	want := ProcStat{State: 'S', PGID: 4242, Session: 4242, Start: 987654}
	if st != want {
		t.Errorf("stat = %+v, want %+v", st, want)
	}
	for _, bad := range []string{"", "1 (x) S 1 2", "1 (x) S a b c d e f g h i j k l m n o p q r s t"} {
		if _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("parsed %q", bad)
		}
	}
}

func TestReadProcStatOfARealProcess(t *testing.T) {
	self, err := ReadProcStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	p := exec.Command("true")
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	child, err := ReadProcStat(p.Process.Pid)
	p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	// A child starts after its parent, in its parent's group.
	if child.Start < self.Start || child.PGID != self.PGID {
		t.Errorf("child %+v, self %+v", child, self)
	}
	if _, err := ReadProcStat(p.Process.Pid); err != ErrNoProcess {
		t.Errorf("a reaped process reads as %v, want ErrNoProcess", err)
	}
}
