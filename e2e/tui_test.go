package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The terminal UI in a real terminal: tmux runs the real open-conduit
// binary's `tui` against the real daemon; the test types with send-keys
// and reads the screen with capture-pane, polling for what it expects.

// tmuxTerm is a terminal: one tmux server, on a socket of its own, running one
// session.
type tmuxTerm struct {
	e    *env
	sock string
}

// startTerminal runs args in a detached 200x50 tmux session; the server
// is killed when the test ends.
func (e *env) startTerminal(args ...string) *tmuxTerm {
	e.t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("CI") == "true" {
			e.t.Fatal("tmux is missing: install it (apt-get install tmux)")
		}
		e.t.Skip("tmux is missing: install it (apt-get install tmux) to run this test")
	}
	term := &tmuxTerm{e: e, sock: filepath.Join(e.root, "tmux")}
	term.tmux(append([]string{"-f", "/dev/null", "new-session", "-d", "-s", "tui", "-x", "200", "-y", "50", "--"}, args...)...)
	e.t.Cleanup(func() { _ = exec.Command("tmux", "-S", term.sock, "kill-server").Run() })
	return term
}

func (term *tmuxTerm) tmux(args ...string) string {
	term.e.t.Helper()
	cmd := exec.Command("tmux", append([]string{"-S", term.sock}, args...)...)
	cmd.Env = append(term.e.environ(), "TERM=xterm-256color")
	out, err := cmd.CombinedOutput()
	if err != nil {
		term.e.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// keys types keys (tmux's names: Enter, Escape, or text).
func (term *tmuxTerm) keys(keys ...string) {
	term.e.t.Helper()
	term.tmux(append([]string{"send-keys", "-t", "tui"}, keys...)...)
}

func (term *tmuxTerm) screen() string {
	term.e.t.Helper()
	return term.tmux("capture-pane", "-p", "-t", "tui")
}

// shows polls the screen until it holds every text, and returns it.
func (term *tmuxTerm) shows(texts ...string) string {
	term.e.t.Helper()
	deadline := time.Now().Add(guard)
	for {
		s := term.screen()
		ok := true
		for _, want := range texts {
			ok = ok && strings.Contains(s, want)
		}
		if ok {
			return s
		}
		if time.Now().After(deadline) {
			term.e.t.Fatalf("the terminal never showed %q; it shows:\n%s", texts, s)
		}
		time.Sleep(poll)
	}
}

// line is the screen's line holding text.
func line(screen, text string) string {
	for _, l := range strings.Split(screen, "\n") {
		if strings.Contains(l, text) {
			return l
		}
	}
	return ""
}

func TestTUIInARealTerminal(t *testing.T) {
	e := newEnv(t)
	e.logJobs()
	e.start()
	w := e.createBound("t", "job")
	exe := e.attempt(w.ID)

	term := e.startTerminal(bins.openConduit, "tui", "--refresh", "200ms")
	s := term.shows("Open Conduit · Work", w.ID, "daemon ready")
	if !strings.Contains(line(s, w.ID), "job") {
		t.Errorf("the Work's row lacks its binding:\n%s", s)
	}
	term.shows("running")

	// Enter opens the Work's executions; enter again the attempt's log,
	// followed while it runs.
	term.keys("Enter")
	s = term.shows("executions of Work "+w.ID, exe.ID)
	if !strings.Contains(line(s, exe.ID), "running") {
		t.Errorf("the execution's row does not say it runs:\n%s", s)
	}
	term.keys("Enter")
	term.shows("log of execution "+exe.ID, "line one")

	// c asks first; y cancels the execution and the status line says so.
	term.keys("Escape")
	term.shows("executions of Work " + w.ID)
	term.keys("c")
	term.shows("Cancel execution "+exe.ID+"?", "y to confirm")
	if got := e.executions(w.ID); got[0].State != "running" {
		t.Fatalf("the execution changed before the confirmation: %+v", got[0])
	}
	term.keys("y")
	term.shows("Cancelled execution " + exe.ID + ": it is stopping; Work " + w.ID)
	var held work
	e.must("GET", "/v1/work/"+w.ID, nil, nil, &held)
	if held.BlockedReason != "operator_cancelled" {
		t.Errorf("after the TUI's cancel the Work is %+v", held)
	}

	// Back on the Work list the Work is held, and q quits.
	term.keys("Escape")
	term.shows("Open Conduit · Work", "operator_cancelled")
	term.keys("q")
	deadline := time.Now().Add(guard)
	for exec.Command("tmux", "-S", term.sock, "has-session", "-t", "tui").Run() == nil {
		if time.Now().After(deadline) {
			t.Fatalf("q did not end the TUI:\n%s", term.screen())
		}
		time.Sleep(poll)
	}
}
