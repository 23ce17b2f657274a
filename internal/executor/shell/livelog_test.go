package shell

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/executor"
)

// LiveLog names the file the supervisor writes the command's output into
// while it runs, and the log artifact is that same file once it ended.
func TestLiveLogIsWhereTheOutputGoes(t *testing.T) {
	b := setup(t)
	ready, gate := b.fifo(t, "ready"), b.fifo(t, "gate")
	req := b.request(t, Config{Command: []string{"sh", "-c", `echo early; echo up > "$1"; read x < "$2"; echo late`, "sh", ready, gate}})
	path, ok := b.exec.LiveLog(req.Dir, req.Epoch)
	if !ok {
		t.Fatal("the shell executor keeps no live log")
	}
	if _, ok := b.exec.LiveLog("", 1); ok {
		t.Error("a live log without an execution directory")
	}
	ch := start(func() (executor.Result, error) { return b.exec.Run(context.Background(), req) })
	readFifo(t, ready)
	// The command wrote its line before it blocked; the supervisor copies
	// it into the log as it comes (a real event, bounded).
	deadline := time.Now().Add(guard)
	for {
		got, _ := os.ReadFile(path)
		if string(got) == "early\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the live log holds %q while the command runs", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	release(t, gate)
	res, err := await(t, ch)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Artifacts) != 1 || res.Artifacts[0].Path != path {
		t.Fatalf("artifacts %+v, want the live log %s", res.Artifacts, path)
	}
	if got, _ := os.ReadFile(path); string(got) != "early\nlate\n" {
		t.Errorf("log = %q", got)
	}
}
