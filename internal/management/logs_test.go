package management_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/internal/management/mgmttest"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// dirLogs is a LiveLogs over a test directory: <dir>/<execution id>.log.
type dirLogs struct{ dir string }

func (l dirLogs) LiveLog(e storage.Execution) (string, bool) {
	return filepath.Join(l.dir, e.ID+".log"), true
}

// logStack is a Stack whose live logs are files of a test directory.
func logStack(t *testing.T) (*mgmttest.Stack, dirLogs) {
	t.Helper()
	logs := dirLogs{dir: t.TempDir()}
	return mgmttest.StartStack(t, mgmttest.StackOptions{LiveLogs: logs}), logs
}

// insertAttempt records a running attempt of w, created at the stack's
// clock.
func insertAttempt(t *testing.T, s *mgmttest.Stack, work, id, binding string) {
	t.Helper()
	s.Clock.Advance(time.Second)
	ctx := context.Background()
	if err := s.Store.WithTx(ctx, func(tx storage.Tx) error {
		_, err := tx.InsertExecution(ctx, &storage.InsertExecutionParams{ID: id, Work: work, Scope: "setup", Binding: binding, Executor: "shell",
			Generation: 1, Owner: "test", LeaseExpiresAt: s.Clock.Now().Add(time.Hour), Deadline: s.Clock.Now().Add(time.Hour), CreatedAt: s.Clock.Now()})
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// finishAttempt ends an attempt with result (and an exit code), storing
// log as its log artifact when it is not empty.
func finishAttempt(t *testing.T, s *mgmttest.Stack, id string, result storage.ExecutionResult, exit int, log string) {
	t.Helper()
	ctx := context.Background()
	s.Clock.Advance(1500 * time.Millisecond)
	e, err := s.Store.GetExecution(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	finished := storage.ExecutionFinished
	if err := s.Store.WithTx(ctx, func(tx storage.Tx) error {
		_, err := tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: id, Epoch: e.Epoch, State: &finished, Result: &result, ExitCode: &exit, Now: s.Clock.Now()})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if log != "" {
		if _, err := s.Artifacts.Put(ctx, storage.Artifact{ID: "art_" + strings.TrimPrefix(id, "exe_"), Execution: id, Work: e.Work, Name: "log",
			MediaType: "text/plain; charset=utf-8", CreatedAt: s.Clock.Now()}, strings.NewReader(log)); err != nil {
			t.Fatal(err)
		}
	}
}

func readLog(t *testing.T, c *client.Client, id string, o client.LogOptions) string {
	t.Helper()
	var b strings.Builder
	if _, err := c.ExecutionLog(context.Background(), id, o, &b); err != nil {
		t.Fatalf("log of %s: %v", id, err)
	}
	return b.String()
}

// follower reads a followed log line by line as it arrives.
type follower struct {
	lines chan string
	done  chan error
}

func follow(c *client.Client, read func(ctx context.Context, c *client.Client, w io.Writer) error) *follower {
	pr, pw := io.Pipe()
	f := &follower{lines: make(chan string, 16), done: make(chan error, 1)}
	go func() {
		err := read(context.Background(), c, pw)
		pw.CloseWithError(err)
		f.done <- err
	}()
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			f.lines <- sc.Text()
		}
		close(f.lines)
	}()
	return f
}

const bound = 30 * time.Second

func (f *follower) next(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-f.lines:
		if !ok {
			t.Fatal("the stream ended before the line came")
		}
		return l
	case <-time.After(bound):
		t.Fatal("no line came")
	}
	return ""
}

func (f *follower) end(t *testing.T) error {
	t.Helper()
	select {
	case err := <-f.done:
		return err
	case <-time.After(bound):
		t.Fatal("the stream did not end")
	}
	return nil
}

// A followed log shows each line as its writer writes it, before the
// writer is done, and ends when the writer closes the file.
func TestExecutionLogFollowsTheLiveFile(t *testing.T) {
	s, logs := logStack(t)
	w := createWork(t, s, "k1")
	insertAttempt(t, s, w.Work.ID, "exe_live", "shell")
	live, err := os.OpenFile(filepath.Join(logs.dir, "exe_live.log"), os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if _, err := live.WriteString("one\n"); err != nil {
		t.Fatal(err)
	}
	f := follow(s.Client, func(ctx context.Context, c *client.Client, w io.Writer) error {
		_, err := c.ExecutionLog(ctx, "exe_live", client.LogOptions{Follow: true}, w)
		return err
	})
	if l := f.next(t); l != "one" {
		t.Fatalf("first line %q", l)
	}
	if _, err := live.WriteString("two\n"); err != nil {
		t.Fatal(err)
	}
	if l := f.next(t); l != "two" {
		t.Fatalf("second line %q", l)
	}
	// What exists so far, without following: the same bytes, and the last
	// line alone with tail.
	if got := readLog(t, s.Client, "exe_live", client.LogOptions{}); got != "one\ntwo\n" {
		t.Errorf("log so far = %q", got)
	}
	if got := readLog(t, s.Client, "exe_live", client.LogOptions{Tail: 1}); got != "two\n" {
		t.Errorf("tail 1 = %q", got)
	}
	if _, err := live.WriteString("three\n"); err != nil {
		t.Fatal(err)
	}
	live.Close()
	if l := f.next(t); l != "three" {
		t.Fatalf("last line %q", l)
	}
	if err := f.end(t); err != nil {
		t.Fatalf("the stream ended with %v", err)
	}
}

// A log not created yet is waited for, and EndStreams ends a follow that
// would otherwise go on.
func TestExecutionLogWaitsForTheFileAndEndsOnShutdown(t *testing.T) {
	s, logs := logStack(t)
	w := createWork(t, s, "k1")
	insertAttempt(t, s, w.Work.ID, "exe_late", "shell")
	f := follow(s.Client, func(ctx context.Context, c *client.Client, w io.Writer) error {
		_, err := c.ExecutionLog(ctx, "exe_late", client.LogOptions{Follow: true}, w)
		return err
	})
	// The stream is served (its header sent) before the file exists.
	var once sync.Once
	live, err := os.OpenFile(filepath.Join(logs.dir, "exe_late.log"), os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer once.Do(func() { live.Close() })
	if _, err := live.WriteString("hello\n"); err != nil {
		t.Fatal(err)
	}
	if l := f.next(t); l != "hello" {
		t.Fatalf("line %q", l)
	}
	s.Resources.EndStreams()
	if err := f.end(t); err != nil {
		t.Fatalf("the stream ended with %v", err)
	}
}

// A finished attempt's log is its stored artifact; a Work's log is every
// attempt's, oldest first, each after its header; tail shows the newest's
// last lines; bad queries are refused.
func TestStoredAndWorkLogs(t *testing.T) {
	s, _ := logStack(t)
	w := createWork(t, s, "k1")
	insertAttempt(t, s, w.Work.ID, "exe_a", "shell")
	finishAttempt(t, s, "exe_a", storage.ResultFailed, 3, "first\nattempt\n")
	insertAttempt(t, s, w.Work.ID, "exe_b", "shell")
	finishAttempt(t, s, "exe_b", storage.ResultSucceeded, 0, "second\nattempt\n")

	if got := readLog(t, s.Client, "exe_a", client.LogOptions{}); got != "first\nattempt\n" {
		t.Errorf("stored log = %q", got)
	}
	// Following a finished attempt writes its log and ends.
	if got := readLog(t, s.Client, "exe_a", client.LogOptions{Follow: true, Tail: 1}); got != "attempt\n" {
		t.Errorf("followed stored log, tail 1 = %q", got)
	}
	var b strings.Builder
	if _, err := s.Client.WorkLog(context.Background(), w.Work.ID, client.LogOptions{Follow: true}, &b); err != nil {
		t.Fatal(err)
	}
	want := "==> execution exe_a (failed) <==\nfirst\nattempt\n==> execution exe_b (succeeded) <==\nsecond\nattempt\n"
	if b.String() != want {
		t.Errorf("work log = %q, want %q", b.String(), want)
	}
	b.Reset()
	if _, err := s.Client.WorkLog(context.Background(), w.Work.ID, client.LogOptions{Tail: 1}, &b); err != nil || b.String() != "attempt\n" {
		t.Errorf("work log tail 1 = %q, %v", b.String(), err)
	}
	tok := s.OwnerToken(t)
	for _, q := range []string{"tail=0", "tail=x", "follow=yes", "lines=3", "tail=100001"} {
		got := do(t, s.Harness, req{method: "GET", path: "/v1/executions/exe_a/log?" + q, token: tok})
		expect(t, got, 422, "invalid_request")
	}
	expect(t, do(t, s.Harness, req{method: "GET", path: "/v1/executions/exe_none/log", token: tok}), 404, "not_found")
	expect(t, do(t, s.Harness, req{method: "GET", path: "/v1/work/wrk_none/log", token: tok}), 404, "not_found")
}

// logElsewhere reads a log through the client and returns what it wrote
// and the owner its LogElsewhereError names ("" without one).
func logElsewhere(t *testing.T, read func(ctx context.Context, w io.Writer) (int64, error)) (string, string) {
	t.Helper()
	var b strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	_, err := read(ctx, &b)
	var le *client.LogElsewhereError
	if errors.As(err, &le) {
		return b.String(), le.Owner
	}
	if err != nil {
		t.Fatalf("reading the log: %v", err)
	}
	return b.String(), ""
}

// An attempt another daemon of the store runs has its live log on that
// daemon's host: its log is what the store holds, followed or not, and the
// response names the owner in Open-Conduit-Log-Owner (a trailer when a
// followed Work's first attempt starts there later). An attempt of this
// daemon, or one whose live log is on this host (the previous process of
// this daemon), is read here as before.
func TestLogOfAnAttemptAnotherDaemonRuns(t *testing.T) {
	logs := dirLogs{dir: t.TempDir()}
	s := mgmttest.StartStack(t, mgmttest.StackOptions{LiveLogs: logs, Owner: "dmn_here"})
	tok := s.OwnerToken(t)
	w := createWork(t, s, "k1")
	insertAttempt(t, s, w.Work.ID, "exe_there", "shell") // owned by "test"
	for _, o := range []client.LogOptions{{}, {Follow: true}, {Follow: true, Tail: 5}} {
		got, owner := logElsewhere(t, func(ctx context.Context, out io.Writer) (int64, error) {
			return s.Client.ExecutionLog(ctx, "exe_there", o, out)
		})
		if got != "" || owner != "test" {
			t.Errorf("log %+v of an attempt another daemon runs = %q naming %q, want nothing naming test", o, got, owner)
		}
	}
	got, owner := logElsewhere(t, func(ctx context.Context, out io.Writer) (int64, error) {
		return s.Client.WorkLog(ctx, w.Work.ID, client.LogOptions{Follow: true}, out)
	})
	if got != "" || owner != "test" {
		t.Errorf("the Work's followed log = %q naming %q", got, owner)
	}
	res := do(t, s.Harness, req{method: "GET", path: "/v1/executions/exe_there/log?follow=true", token: tok})
	if res.status != 200 || res.header.Get(api.LogOwnerHeader) != "test" {
		t.Errorf("the raw answer: %d, %s: %q", res.status, api.LogOwnerHeader, res.header.Get(api.LogOwnerHeader))
	}

	// The live log is on this host: the previous process's, read here.
	if err := os.WriteFile(filepath.Join(logs.dir, "exe_there.log"), []byte("here\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, owner := logElsewhere(t, func(ctx context.Context, out io.Writer) (int64, error) {
		return s.Client.ExecutionLog(ctx, "exe_there", client.LogOptions{}, out)
	}); got != "here\n" || owner != "" {
		t.Errorf("a live log on this host = %q naming %q", got, owner)
	}
	// Once it ended, its stored log is read anywhere, naming no owner.
	finishAttempt(t, s, "exe_there", storage.ResultSucceeded, 0, "stored\n")
	if got, owner := logElsewhere(t, func(ctx context.Context, out io.Writer) (int64, error) {
		return s.Client.ExecutionLog(ctx, "exe_there", client.LogOptions{Follow: true}, out)
	}); got != "stored\n" || owner != "" {
		t.Errorf("a finished attempt's log = %q naming %q", got, owner)
	}

	// A followed Work whose first attempt starts on another daemon later.
	w2 := createWork(t, s, "k2")
	f := make(chan [2]string, 1)
	go func() {
		var b strings.Builder
		_, err := s.Client.WorkLog(context.Background(), w2.Work.ID, client.LogOptions{Follow: true}, &b)
		var le *client.LogElsewhereError
		if errors.As(err, &le) {
			f <- [2]string{b.String(), le.Owner}
			return
		}
		f <- [2]string{b.String(), fmt.Sprint("no owner named: ", err)}
	}()
	insertAttempt(t, s, w2.Work.ID, "exe_later", "shell")
	select {
	case r := <-f:
		if r != [2]string{"", "test"} {
			t.Errorf("a followed Work whose attempt started elsewhere: %q", r)
		}
	case <-time.After(bound):
		t.Fatal("the follow of a Work whose attempt started elsewhere did not end")
	}
}
