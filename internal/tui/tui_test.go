package tui

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/internal/daemon"
	"github.com/open-conduit/open-conduit/internal/executor/shell"
	"github.com/open-conduit/open-conduit/internal/reaper"
)

// The model is driven as bubbletea drives it (Update with key messages,
// its commands run and their messages fed back) and judged by its View,
// against the real daemon composed in process on a temporary state
// directory, with real shell jobs: nothing of the client is faked.

// guard bounds every wait for a real event; nothing is timed against it.
const guard = 60 * time.Second

// poll is how often a waiting test ends a refresh interval: the screen is
// read again that often while the test waits for the daemon.
const poll = 20 * time.Millisecond

// TestMain lets the test binary stand in for the open-conduit binary the
// daemon runs its shell jobs' supervisor with.
func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == "supervise" {
		code := 0
		if err := shell.Supervise(os.Args[2]); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			code = 1
		}
		syscall.Exit(code)
	}
	// No test may leave a goroutine running: the log streams and the
	// commands the driver ran end with the test.
	goleak.VerifyTestMain(m)
}

// world is a running daemon on a fresh state directory.
type world struct {
	t      *testing.T
	c      *client.Client
	fifo   string
	logs   *syncBuffer
	cancel context.CancelFunc
	done   chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startDaemon starts the real daemon with scope t: binding job prints a
// line, then blocks reading a fifo; gated waits for an approval (the human
// extension) before its first attempt, then prints one line.
func startDaemon(t *testing.T) *world {
	t.Helper()
	dir, err := os.MkdirTemp("", "octui")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	state := filepath.Join(dir, "s")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := map[string]any{
		"version": 1,
		"scopes": map[string]any{"t": map[string]any{
			"bindings": map[string]any{
				"job":   map[string]any{"executor": "shell", "config": map[string]any{"command": []string{"sh", "-c", `echo "line one"; read code < "$FIFO"; echo "after $code"; exit "$code"`}, "env": map[string]string{"FIFO": fifo}}},
				"gated": map[string]any{"executor": "shell", "config": map[string]any{"command": []string{"sh", "-c", "echo gated"}}},
			},
		}},
		"extensions": map[string]any{"human": map[string]any{"scopes": []string{"t"}, "config": map[string]any{"bindings": []string{"gated"}}}},
	}
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(state, daemon.ConfigFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	ready := make(chan daemon.Info, 1)
	d, err := daemon.New(context.Background(), daemon.Options{StateDir: state, Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Executable: self, Version: "test", Ready: func(i daemon.Info) { ready <- i }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &world{t: t, fifo: fifo, logs: logs, cancel: cancel, done: make(chan error, 1)}
	go func() { w.done <- errors.Join(d.Serve(ctx), d.Close()) }()
	t.Cleanup(w.stop)
	select {
	case info := <-ready:
		w.c = client.New(info.Socket, client.TokenFile(info.TokenFile))
	case err := <-w.done:
		t.Fatalf("the daemon stopped before it was ready: %v", err)
	case <-time.After(guard):
		t.Fatal("the daemon did not become ready")
	}
	return w
}

func (w *world) stop() {
	// A job still blocked on the fifo is let go, so nothing outlives the
	// test (a fifo without a reader refuses the open, which is fine).
	if f, err := os.OpenFile(w.fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		f.WriteString("0\n")
		f.Close()
	}
	w.cancel()
	select {
	case err := <-w.done:
		if err != nil {
			w.t.Errorf("daemon: %v", err)
		}
	case <-time.After(guard):
		w.t.Error("the daemon did not stop")
	}
	// The supervisors the daemon started are the test process's children,
	// each watched by a goroutine until it exits: end their groups and wait
	// until every one is gone, so that no such goroutine outlives the test
	// on a slow machine.
	for _, pid := range children() {
		unix.Kill(-pid, unix.SIGKILL)
	}
	for end := time.Now().Add(guard); len(children()) > 0; time.Sleep(poll) {
		if time.Now().After(end) {
			w.t.Error("the jobs' supervisors did not exit")
			return
		}
	}
}

// children are the live or unreaped child processes of the test process.
func children() []int { return reaper.Children(os.Getpid()) }

func (w *world) create(binding string) string {
	w.t.Helper()
	res, err := w.c.CreateWork(context.Background(), client.CreateWorkRequest{Scope: "t", Binding: binding}, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	return res.Work.ID
}

// driver runs the model as a bubbletea program would: commands in their
// own goroutines, their messages fed to Update one at a time on the test's
// goroutine. The refresh ticker is the test's: tick ends one interval.
type driver struct {
	t     *testing.T
	m     *Model
	msgs  chan tea.Msg
	ticks chan struct{}
	done  chan struct{}
}

func drive(t *testing.T, c *client.Client) *driver {
	t.Helper()
	d := &driver{t: t, msgs: make(chan tea.Msg, 256), ticks: make(chan struct{}, 1), done: make(chan struct{})}
	d.m = New(Options{Client: c, Ticker: func(time.Duration) tea.Cmd {
		return func() tea.Msg {
			select {
			case <-d.ticks:
			case <-d.done:
			}
			return nil
		}
	}})
	t.Cleanup(func() {
		d.m.stopLog()
		close(d.done)
	})
	d.send(tea.WindowSizeMsg{Width: 200, Height: 40})
	d.run(d.m.Init())
	return d
}

func (d *driver) run(cmd tea.Cmd) {
	if cmd == nil {
		return
	}
	go func() {
		msg := cmd()
		select {
		case d.msgs <- msg:
		case <-d.done:
		}
	}()
}

// send hands one message to Update and runs the command it returns.
func (d *driver) send(msg tea.Msg) {
	switch msg := msg.(type) {
	case nil:
		return
	case tea.BatchMsg:
		for _, c := range msg {
			d.run(c)
		}
		return
	}
	_, cmd := d.m.Update(msg)
	d.run(cmd)
}

// press sends keys: a name bubbletea knows ("enter", "esc") or runes.
func (d *driver) press(keys ...string) {
	for _, k := range keys {
		switch k {
		case "enter":
			d.send(tea.KeyMsg{Type: tea.KeyEnter})
		case "esc":
			d.send(tea.KeyMsg{Type: tea.KeyEsc})
		case "down":
			d.send(tea.KeyMsg{Type: tea.KeyDown})
		default:
			d.send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)})
		}
	}
}

// tick ends the current refresh interval.
func (d *driver) tick() {
	select {
	case d.ticks <- struct{}{}:
	default:
	}
}

// until feeds messages (and refresh ticks) to the model until its view
// satisfies cond; it fails after guard.
func (d *driver) until(what string, cond func(string) bool) string {
	d.t.Helper()
	deadline := time.After(guard)
	poll := time.NewTicker(poll)
	defer poll.Stop()
	for {
		if v := d.m.View(); cond(v) {
			return v
		}
		select {
		case msg := <-d.msgs:
			d.send(msg)
		case <-poll.C:
			d.tick()
		case <-deadline:
			d.t.Fatalf("the screen never showed %s; it shows:\n%s", what, d.m.View())
		}
	}
}

func (d *driver) shows(texts ...string) string {
	d.t.Helper()
	return d.until(strings.Join(texts, " and "), func(v string) bool {
		for _, s := range texts {
			if !strings.Contains(v, s) {
				return false
			}
		}
		return true
	})
}

// selectWork moves the selection to the first row about Work id.
func (d *driver) selectWork(id string) {
	d.t.Helper()
	d.selectRow(func(r row) bool { return r.work == id })
}

// selectRow moves the selection down from the top to the first row ok
// accepts, with the keys.
func (d *driver) selectRow(ok func(row) bool) {
	d.t.Helper()
	d.press("g")
	for {
		if r, sel := d.m.selected(); sel && ok(r) {
			return
		}
		if d.m.cursor >= len(d.m.data.rows)-1 {
			d.t.Fatalf("no such row:\n%s", d.m.View())
		}
		d.press("down")
	}
}

// tableLine is a line of a table: it starts with a record's id or an
// event's sequence number (the status line starts with words).
var tableLine = regexp.MustCompile(`^\s*(▶ )?([a-z]+_[0-9a-z]+|[0-9]+)\s`)

// rowOf is the screen's table line holding id.
func rowOf(view, id string) string {
	for _, l := range strings.Split(view, "\n") {
		if tableLine.MatchString(l) && strings.Contains(l, id) {
			return l
		}
	}
	return ""
}

func rowShows(id string, texts ...string) func(string) bool {
	return func(v string) bool {
		r := rowOf(v, id)
		for _, s := range texts {
			if !strings.Contains(r, s) {
				return false
			}
		}
		return r != ""
	}
}

var exeID = regexp.MustCompile(`exe_[0-9a-z]+`)

func TestWorkExecutionsLogAndControls(t *testing.T) {
	w := startDaemon(t)
	work := w.create("job")
	d := drive(t, w.c)
	d.shows("daemon ready", "version test")
	d.until("Work "+work+" running", rowShows(work, "running", "job"))

	// The list is read again on the ticker only: a Work created now is
	// not on the screen until the interval ends.
	second := w.create("gated")
	d.press("down", "g")
	if strings.Contains(d.m.View(), second) {
		t.Fatalf("the Work list changed before a refresh:\n%s", d.m.View())
	}
	d.until("the new Work "+second+" after a tick", rowShows(second, "waiting"))
	d.press("down") // the newest is first: the job's Work is the second row

	// Enter opens the Work's executions; enter again its log, followed.
	d.press("enter")
	v := d.until("the running execution", func(v string) bool {
		return strings.Contains(v, "executions of Work "+work) && strings.Contains(v, "running") && exeID.MatchString(v)
	})
	exe := exeID.FindString(rowOf(v, "running"))
	d.press("enter")
	d.shows("log of execution "+exe, "line one", "following the log")

	// c asks first; n keeps it.
	d.press("c")
	d.shows("Cancel execution "+exe+"?", "y to confirm")
	d.press("n")
	d.shows("Kept it: nothing was done.")
	if e, err := w.c.GetExecution(context.Background(), exe, nil); err != nil || e.State != "running" {
		t.Fatalf("after n the execution is %+v, %v", e, err)
	}
	// y cancels it, and the status line says so; the stream ends with
	// the attempt.
	d.press("c", "y")
	d.shows("Cancelled execution " + exe + ": it is stopping; Work " + work + " is held (operator_cancelled) until a retry.")
	d.shows("the attempt ended")

	// Back in the Work list the Work is held until a retry; r retries.
	d.press("esc")
	d.until("the execution finished", rowShows(exe, "finished", "cancelled"))
	d.press("esc")
	d.until("Work "+work+" held", rowShows(work, "operator_cancelled"))
	d.press("r")
	d.shows("Retry (or release) Work " + work + "?")
	d.press("y")
	d.shows("Retried Work " + work + ": it is")
	d.until("Work "+work+" running again", rowShows(work, "running"))

	// l follows the Work's log across its attempts.
	d.press("l")
	d.shows("log of Work "+work, "line one", "following the log")
	d.press("esc")
	d.until("the Work list again", rowShows(work, "running"))

	// A refusal shows the API's code and message: a running Work cannot
	// be retried.
	d.press("r", "y")
	d.shows("Refused: conflict: ")

	// w wakes: this Work waits for nothing, which the status line says.
	d.press("w")
	d.shows("Wake Work " + work)
	d.press("y")
	d.shows("matched no wait")

	// c on the Work list cancels the Work itself.
	d.press("c")
	d.shows("Cancel Work " + work + " and stop its attempt?")
	d.press("y")
	d.shows("Cancelled Work " + work + ": it is cancelled")
	d.until("Work "+work+" cancelled", rowShows(work, "cancelled"))
}

func TestApprovalsWaitsEventsAndHelp(t *testing.T) {
	w := startDaemon(t)
	approved, denied := w.create("gated"), w.create("gated")
	d := drive(t, w.c)

	// 4: the pending approvals, one per gated Work.
	d.press("4")
	v := d.until("both approvals", func(v string) bool {
		return strings.Contains(v, "Pending approvals") && rowOf(v, approved) != "" && rowOf(v, denied) != ""
	})
	if !strings.Contains(rowOf(v, approved), "start") {
		t.Fatalf("the approval of a held start is not of kind start:\n%s", v)
	}
	d.selectWork(approved)
	d.press("a")
	d.shows("Approve ", "of Work "+approved+"?")
	d.press("y")
	d.shows("of Work " + approved + " is approved by operator:")
	d.until("the approved one gone from the pending list", func(v string) bool { return rowOf(v, approved) == "" && rowOf(v, denied) != "" })

	// d asks for a reason; enter without one is refused, esc keeps it.
	d.selectWork(denied)
	d.press("d")
	d.shows("Deny ", "of Work "+denied, "Type the reason")
	d.press("enter")
	d.shows("A reason is needed")
	d.press("n", "o", "p", "e", "enter")
	d.shows("of Work " + denied + " is denied by operator:")
	d.until("no pending approval left", func(v string) bool { return strings.Contains(v, "(none)") })

	// The approved Work ran; the denied one failed with the reason.
	d.press("1")
	d.until("the approved Work succeeded", rowShows(approved, "succeeded"))
	d.until("the denied Work failed", rowShows(denied, "failed"))

	// 2: the waits, with the gate that parked each start.
	d.press("2")
	d.until("the approvals' waits", func(v string) bool {
		return strings.Contains(v, "Waits") && rowShows(approved, "human")(v) && rowShows(denied, "human")(v)
	})

	// 3: the events, newest first; enter follows one's causal chain: a
	// decision's parent is the operator's action.
	d.press("3")
	d.until("the events", func(v string) bool { return strings.Contains(v, "human.approval.decided") })
	d.selectRow(func(r row) bool { return r.cells[2] == "human.approval.decided" })
	decided := d.m.selectedID()
	d.press("enter")
	v = d.shows("causal chain of event "+decided, "(human.approval.decided): root evt_", "▶")
	if r := rowOf(v, decided); !strings.Contains(r, "▶") {
		t.Errorf("the chain does not mark the event it follows:\n%s", v)
	}
	if !strings.Contains(v, "core.action") {
		t.Errorf("the chain of a decision lacks the action that caused it:\n%s", v)
	}
	d.press("esc")
	d.shows("Open Conduit · Events", "core.work.finished")

	// ? shows every key; esc closes it.
	d.press("?")
	d.shows("retry or release Work", "deny (asks a reason)", "follow the log")
	d.press("esc")
	d.until("the help closed", func(v string) bool { return !strings.Contains(v, "deny (asks a reason)") })

	// An action that does not apply is said so.
	d.press("r")
	d.shows("That action does not apply here")
}

// A view operator sees the same screens; its actions are refused, and the
// status line shows the refusal's code and message, never its token.
func TestAViewOperatorsActionIsRefusedOnTheStatusLine(t *testing.T) {
	w := startDaemon(t)
	work := w.create("job")
	issued, err := w.c.AddOperator(context.Background(), "viewer", "view")
	if err != nil {
		t.Fatal(err)
	}
	d := drive(t, client.New(w.c.Socket(), client.StaticToken(issued.Token)))
	d.until("Work "+work+" running", rowShows(work, "running"))
	d.press("c")
	d.shows("Cancel Work " + work)
	d.press("y")
	v := d.shows("Refused: forbidden_role: ")
	if strings.Contains(v, issued.Token) {
		t.Fatalf("the screen shows the operator's token:\n%s", v)
	}
	if wk, err := w.c.GetWork(context.Background(), work, nil); err != nil || wk.State != "running" {
		t.Fatalf("after the refused cancel the Work is %+v, %v", wk, err)
	}
}
