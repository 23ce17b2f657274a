package proc

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestAStreamKeepsStdoutApartFromTheLog runs a real supervisor (this test
// binary) whose launch names a stream and a stdin file: what it reads
// from stdin and writes to stdout lands in the stream alone, stderr in the
// log, and the status records the exit.
func TestAStreamKeepsStdoutApartFromTheLog(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "in.txt"), []byte("{\"a\":1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &Supervisor{Program: self}
	h, err := s.Start(dir, Launch{
		Argv: []string{"sh", "-c", `cat; echo oops >&2; exit 3`},
		Env:  []string{"PATH=" + os.Getenv("PATH")}, Dir: dir, Stream: "stream.jsonl", Stdin: "in.txt",
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	select {
	case <-h.Done():
	case <-time.After(time.Minute):
		t.Fatal("the supervisor never exited")
	}
	st, ok, err := ReadStatus(dir)
	if err != nil || !ok || !st.Exited || st.ExitCode != 3 {
		t.Fatalf("status = %+v, %v, %v", st, ok, err)
	}
	for name, want := range map[string]string{"stream.jsonl": "{\"a\":1}\n", LogFile: "oops\n"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", name, b, err, want)
		}
	}
	if _, err := s.Start(dir, Launch{Argv: []string{"true"}}); !errors.Is(err, ErrAlreadyStarted) {
		t.Errorf("a second Start = %v, want ErrAlreadyStarted", err)
	}
}
