package e2e

import (
	"encoding/json"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/internal/executor/agent/agenttest"
)

// This file holds issue 21's evidence for the agents: the real Claude
// Code and Codex CLIs run SANDBOXED under the real daemon (bwrap, no
// network but the egress proxy), and reach the scripted model server on
// the host's loopback only through the proxy, and only when the binding's
// egress allows it. Both send their requests for an http:// base URL to
// HTTP_PROXY in absolute form, which the proxy forwards (docs/egress.md).

// installDirs are the host directories the sandbox must mount read-only
// for bin to run inside: the node_modules directory holding both the
// binary's link and the file it resolves to (an npm install outside /usr
// and /opt), else the directories of both.
func installDirs(t *testing.T, bin string) []string {
	t.Helper()
	real, err := filepath.EvalSymlinks(bin)
	if err != nil {
		t.Fatal(err)
	}
	under := func(p, dir string) bool { return strings.HasPrefix(p, dir+string(filepath.Separator)) }
	for d := filepath.Dir(real); d != filepath.Dir(d); d = filepath.Dir(d) {
		if filepath.Base(d) == "node_modules" && under(bin, d) {
			return []string{d}
		}
	}
	dirs := []string{filepath.Dir(real)}
	if d := filepath.Dir(bin); !under(d, dirs[0]) && d != dirs[0] {
		dirs = append(dirs, d)
	}
	return dirs
}

// sandboxed rewrites the world's configuration so that its agent binding
// runs sandboxed, the CLI's install directory mounted read-only, with
// egress as its allowlist.
func (w *agentWorld) sandboxed(egress []string) {
	w.t.Helper()
	var cfg map[string]any
	if err := json.Unmarshal(w.config(agentGrant), &cfg); err != nil {
		w.t.Fatal(err)
	}
	b := cfg["scopes"].(map[string]any)["t"].(map[string]any)["bindings"].(map[string]any)["agent"].(map[string]any)
	b["config"].(map[string]any)["sandbox"] = map[string]any{"enabled": true, "read_only": installDirs(w.t, w.bin)}
	b["egress"] = egress
	out, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		w.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w.state, "config.json"), out, 0o600); err != nil {
		w.t.Fatal(err)
	}
}

// egressRecords are the execution's egress records as `executions
// egress --json` prints them.
func (w *agentWorld) egressRecords(executionID string) []egressRecord {
	w.t.Helper()
	var p struct {
		Items []egressRecord `json:"items"`
	}
	w.ocJSON(&p, "executions", "egress", executionID)
	return p.Items
}

type egressRecord struct {
	Host      string `json:"host"`
	Port      int    `json:"port"`
	Allowed   bool   `json:"allowed"`
	Reason    string `json:"reason"`
	BytesUp   int64  `json:"bytes_up"`
	BytesDown int64  `json:"bytes_down"`
	EndedAt   string `json:"ended_at"`
}

// workEnded polls the Work through the CLI until it ends. Not through
// waitWork: its client per request leaves a connection open each poll,
// and a wait of a few seconds fills the management socket's limit.
func (w *agentWorld) workEnded(id string) work {
	w.t.Helper()
	var wk work
	until(w.t, "Work "+id+" ended", func() bool {
		w.ocJSON(&wk, "work", "get", id)
		return terminal(wk.State)
	})
	return wk
}

// modelTarget is the scripted server's host and port.
func modelTarget(t *testing.T, srv *agenttest.Server) (string, int) {
	t.Helper()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	host, portText, err := net.SplitHostPort(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(portText)
	return host, port
}

// A sandboxed agent CLI whose binding's egress names the model server:
// offered exactly its grant, it emits, declares the outcome and ends its
// turn; every model request went through the proxy (one allowed record
// per request the server saw, nothing allowed elsewhere). With an
// allowlist that does not name the server, its request is refused and
// recorded so, the Work fails, and nothing reaches the server.
func TestSandboxedAgentReachesItsModelOnlyThroughTheProxy(t *testing.T) {
	needBwrap(t)
	for _, cli := range agentCLIs {
		t.Run(cli.executor, func(t *testing.T) { sandboxedAgentThroughProxy(t, cli) })
	}
}

func sandboxedAgentThroughProxy(t *testing.T, cli agentCLI) {

	t.Run("allowed", func(t *testing.T) {
		w := newAgentWorld(t, cli, []agenttest.Step{
			agenttest.Call("mcp__os__emit", map[string]any{"type": "agent.sandboxed"}),
			agenttest.Call("mcp__os__declare_outcome", map[string]any{"outcome": "succeeded", "message": "sandboxed"}),
			agenttest.Reply("Done."),
		})
		host, port := modelTarget(t, w.srv)
		target := net.JoinHostPort(host, strconv.Itoa(port))
		w.sandboxed([]string{target})
		w.startDaemon()
		wk, x := w.issue()
		defer func() {
			if t.Failed() {
				w.logSegments(x.ID)
				t.Logf("the daemon's logs:\n%s", w.allLogs())
				t.Logf("egress records: %+v", w.egressRecords(x.ID))
				files, _ := filepath.Glob(filepath.Join(w.state, "executions", x.ID, "segments", "*", "stream.jsonl"))
				for _, f := range files {
					b, _ := os.ReadFile(f)
					for _, line := range strings.Split(string(b), "\n") {
						if strings.Contains(line, `"system"`) {
							t.Logf("stream: %.600s", line)
						}
					}
				}
			}
		}()
		done := w.workEnded(wk.ID)
		if done.State != "succeeded" || done.OutcomeMessage != "sandboxed" {
			t.Fatalf("the sandboxed Work ended %s (%q), want succeeded as scripted", done.State, done.OutcomeMessage)
		}
		reqs := w.srv.Requests()
		if len(reqs) != 3 || !w.srv.Done() {
			t.Fatalf("the conversation had %d requests, want the script's 3", len(reqs))
		}
		if !slices.Equal(reqs[0].Tools, cli.tools()) {
			t.Errorf("the sandboxed agent was offered %q, want exactly %q", reqs[0].Tools, cli.tools())
		}
		var evs page[eventRecord]
		w.ocJSON(&evs, "events", "list", "--execution", x.ID)
		if len(evs.Items) != 1 || evs.Items[0].Type != "agent.sandboxed" || evs.Items[0].Execution != x.ID {
			t.Errorf("the execution's Events %+v, want the one agent.sandboxed it emitted", evs.Items)
		}

		recs := w.egressRecords(x.ID)
		allowed := 0
		for _, r := range recs {
			switch {
			case r.Host == host && r.Port == port:
				if !r.Allowed || r.Reason != "" || r.BytesUp == 0 || r.BytesDown == 0 || r.EndedAt == "" {
					t.Errorf("a connection to the model server: %+v, want allowed, ended, with bytes each way", r)
				}
				allowed++
			case r.Allowed:
				t.Errorf("a connection elsewhere was allowed: %+v", r)
			}
		}
		if want := len(reqs) + len(w.srv.SideRequests()); allowed != want {
			t.Errorf("%d allowed connections to %s, want one per request the server saw (%d): %+v", allowed, target, want, recs)
		}
		code, table, stderr := w.oc("executions", "egress", x.ID)
		if code != 0 || !strings.Contains(table, target) || !strings.Contains(table, "allowed") {
			t.Errorf("executions egress: exit %d %q %q", code, table, stderr)
		}
		w.noCanary(x.ID)
	})

	t.Run("refused", func(t *testing.T) {
		w := newAgentWorld(t, cli, nil) // any request reaching it fails the test
		host, port := modelTarget(t, w.srv)
		target := net.JoinHostPort(host, strconv.Itoa(port))
		other := net.JoinHostPort(host, strconv.Itoa(port%65535+1))
		w.sandboxed([]string{other})
		w.startDaemon()
		wk, x := w.issue()
		defer func() {
			if t.Failed() {
				w.logSegments(x.ID)
				t.Logf("the daemon's logs:\n%s", w.allLogs())
			}
		}()
		done := w.workEnded(wk.ID)
		if done.State != "failed" {
			t.Errorf("the Work whose model is not allowed ended %s (%q), want failed", done.State, done.OutcomeMessage)
		}
		if n := len(w.srv.Requests()) + len(w.srv.SideRequests()); n != 0 {
			t.Errorf("%d requests reached the model server through a refusing proxy", n)
		}
		refused := 0
		for _, r := range w.egressRecords(x.ID) {
			if r.Allowed {
				t.Errorf("a connection was allowed: %+v", r)
			}
			if r.Host == host && r.Port == port && r.Reason == "not_allowed" {
				refused++
			}
		}
		if refused == 0 {
			t.Errorf("no refused connection to %s is recorded", target)
		}
		code, table, _ := w.oc("executions", "egress", x.ID)
		if code != 0 || !strings.Contains(table, target) || !strings.Contains(table, "not_allowed") {
			t.Errorf("executions egress: exit %d %q", code, table)
		}
	})
}
