package e2e

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/internal/executor/agent/agenttest"
	"github.com/open-conduit/open-conduit/internal/executor/proc"
	"github.com/open-conduit/open-conduit/internal/reaper"
)

// This file holds the end-to-end evidence of the agent executors (issue
// 12): the real daemon runs the real claude and codex CLIs, pointed at a
// scripted model server (agenttest), and the test drives everything
// through the open-conduit binary as an operator would.

// modelKey is the model API key the binding's secret gives the agent: a
// canary searched for everywhere the daemon keeps or prints something.
const modelKey = "sk-e2e-model-key-canary-3f9d1c7a"

// modelKeyVar is the daemon's environment variable the configuration's
// secret reads the key from.
const modelKeyVar = "OC_E2E_MODEL_KEY"

// agentGrant is what the agent binding is granted.
var agentGrant = []string{"declare_outcome", "emit", "read_context", "wait"}

// agentCLI is what differs between the two agent executors here.
type agentCLI struct {
	executor string                                                // the binding's executor
	bin      func(testing.TB) string                               // the pinned CLI, or a skip
	model    string                                                // the model the binding names
	keyVar   string                                                // the binding's secret's variable
	server   func(testing.TB, agenttest.Options) *agenttest.Server // the scripted model
	baseURL  func(*agenttest.Server) string                        // the binding's base_url
	// extra are the tools the CLI offers beside the toolbelt's MCP tools
	// whatever its configuration (docs/executor-agents.md).
	extra []string
}

var agentCLIs = []agentCLI{
	{
		executor: "claude-code", bin: agenttest.Claude, model: "claude-sonnet-4-5", keyVar: "ANTHROPIC_API_KEY",
		server:  agenttest.Anthropic,
		baseURL: func(s *agenttest.Server) string { return s.URL },
	},
	{
		executor: "codex", bin: agenttest.Codex, model: "gpt-5-codex", keyVar: "OPENAI_API_KEY",
		server:  agenttest.OpenAI,
		baseURL: func(s *agenttest.Server) string { return s.URL + "/v1" },
		extra:   []string{"list_mcp_resource_templates", "list_mcp_resources", "read_mcp_resource", "request_user_input"},
	},
}

// tools are the names the model server must see offered: exactly the
// grant as the os MCP server's tools, and the CLI's fixed extras.
func (c agentCLI) tools() []string {
	out := slices.Clone(c.extra)
	for _, op := range agentGrant {
		out = append(out, "mcp__os__"+op)
	}
	slices.Sort(out)
	return out
}

// agentWorld is one test's daemon world around one agent CLI.
type agentWorld struct {
	*env
	cli agentCLI
	bin string // the CLI's binary
	srv *agenttest.Server

	mu      sync.Mutex
	outputs []string // every CLI output the test saw
	tokens  map[string]bool
	stop    chan struct{}
	stopped chan struct{}
}

// newAgentWorld makes the env, starts the model server with script and
// writes the configuration (config, granting agentGrant) and the playbook
// answer-issue for the first start.
func newAgentWorld(t *testing.T, cli agentCLI, script []agenttest.Step) *agentWorld {
	t.Helper()
	bin := cli.bin(t)
	w := &agentWorld{env: newEnv(t), cli: cli, tokens: map[string]bool{}, stop: make(chan struct{}), stopped: make(chan struct{})}
	// Registered after newEnv's, so it runs before the directory goes:
	// no agent of a failed test is left running.
	t.Cleanup(func() { killAgentGroups(w.state) })
	w.srv = cli.server(t, agenttest.Options{APIKey: modelKey, Model: cli.model, Tools: cli.tools(), Script: script})
	w.bin = bin
	b := w.config(agentGrant)
	playbook := "---\nname: answer-issue\ndescription: Answer an issue.\noperations: [read_context, emit, wait, declare_outcome]\n---\n" +
		"Read the context, emit an answer, wait for a review, then declare the outcome.\n"
	if err := os.MkdirAll(filepath.Join(w.state, "playbooks"), 0o700); err != nil {
		t.Fatal(err)
	}
	for path, content := range map[string][]byte{"config.json": b, filepath.Join("playbooks", "answer-issue.md"): []byte(playbook)} {
		if err := os.WriteFile(filepath.Join(w.state, path), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	go w.watchTokens()
	t.Cleanup(w.stopWatching)
	return w
}

// config is the configuration: scope t grants ops (its ceiling and the
// binding's operations), may emit only the agent family and routes
// issue.opened to the agent binding, whose model key is the secret
// model-key read from the daemon's environment.
func (w *agentWorld) config(ops []string) []byte {
	w.t.Helper()
	cli := w.cli
	cfg := map[string]any{
		"version": 1,
		"secrets": map[string]any{"model-key": "env:" + modelKeyVar},
		"scopes": map[string]any{"t": map[string]any{
			"authorization": map[string]any{"operations": ops, "reads": []string{"work", "events"}, "emit": []string{"agent"}},
			"bindings": map[string]any{"agent": map[string]any{
				"executor":   cli.executor,
				"requires":   []string{"toolbelt", "resume"},
				"operations": ops,
				"secrets":    map[string]any{cli.keyVar: "model-key"},
				"config": map[string]any{
					// Unsandboxed: these tests reach the scripted model
					// server on the host's loopback directly (the
					// sandboxed agent reaches it through the egress proxy:
					// agents_sandbox_test.go).
					"sandbox":  map[string]any{"enabled": false},
					"binary":   w.bin,
					"model":    cli.model,
					"base_url": cli.baseURL(w.srv),
					"playbook": "answer-issue",
					"prompt":   "Answer issue #{{(index .Events 0).Data.issue.number}}",
					"timeout":  "10m",
				},
			}},
			"routes": []any{map[string]any{"id": "issues", "match": map[string]any{"type": "issue.opened"}, "binding": "agent"}},
		}},
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		w.t.Fatal(err)
	}
	return b
}

// watchTokens samples every run directory's token file until stopped, so
// that every execution token issued while the test runs (the first, the
// resume's, the adoption's) is a canary too.
func (w *agentWorld) watchTokens() {
	defer close(w.stopped)
	for {
		w.sampleTokens()
		select {
		case <-w.stop:
			return
		case <-time.After(poll):
		}
	}
}

func (w *agentWorld) sampleTokens() {
	files, _ := filepath.Glob(filepath.Join(w.state, "runs", "*", "token", "token"))
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil {
			if tok := strings.TrimSpace(string(b)); tok != "" {
				w.mu.Lock()
				w.tokens[tok] = true
				w.mu.Unlock()
			}
		}
	}
}

func (w *agentWorld) stopWatching() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.stopped
}

// seenTokens are the execution tokens sampled so far.
func (w *agentWorld) seenTokens() []string {
	w.sampleTokens()
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for tok := range w.tokens {
		out = append(out, tok)
	}
	return out
}

// startDaemon starts the daemon with the model key in its environment.
func (w *agentWorld) startDaemon() *daemon { return w.start(modelKeyVar + "=" + modelKey) }

// oc runs the open-conduit CLI, keeping its output for the canary search.
func (w *agentWorld) oc(args ...string) (int, string, string) {
	w.t.Helper()
	code, stdout, stderr := w.env.cli(args...)
	w.mu.Lock()
	w.outputs = append(w.outputs, stdout, stderr)
	w.mu.Unlock()
	return code, stdout, stderr
}

// ocJSON is oc with --json, which must exit 0, decoded into out.
func (w *agentWorld) ocJSON(out any, args ...string) {
	w.t.Helper()
	code, stdout, stderr := w.oc(append(args, "--json")...)
	if code != 0 {
		w.t.Fatalf("open-conduit %v: exit %d: %s", args, code, stderr)
	}
	if err := json.Unmarshal([]byte(stdout), out); err != nil {
		w.t.Fatalf("open-conduit %v printed %q: %v", args, stdout, err)
	}
}

// agentExecution is an execution as `executions get --json` shows it.
type agentExecution struct {
	ID      string `json:"id"`
	Work    string `json:"work"`
	Epoch   int64  `json:"epoch"`
	State   string `json:"state"`
	Result  string `json:"result"`
	Message string `json:"message"`
	Session string `json:"session"`
	Usage   *struct {
		InputTokens  int64   `json:"input_tokens"`
		OutputTokens int64   `json:"output_tokens"`
		CostUSD      float64 `json:"cost_usd"`
		Turns        int64   `json:"turns"`
	} `json:"usage"`
}

func (w *agentWorld) execution(id string) agentExecution {
	w.t.Helper()
	var x agentExecution
	w.ocJSON(&x, "executions", "get", id)
	return x
}

// untilExecution polls `executions get` until cond holds.
func (w *agentWorld) untilExecution(id, what string, cond func(agentExecution) bool) agentExecution {
	w.t.Helper()
	var x agentExecution
	until(w.t, "execution "+id+" "+what, func() bool {
		x = w.execution(id)
		return cond(x)
	})
	return x
}

// issue emits the operator's issue.opened Event and returns the Work its
// route created and that Work's first execution.
func (w *agentWorld) issue() (work, execution) {
	w.t.Helper()
	if code, _, stderr := w.oc("emit", "issue.opened", "--scope", "t", "--data", `{"issue":{"number":42}}`); code != 0 {
		w.t.Fatalf("emit issue.opened: exit %d: %s", code, stderr)
	}
	var p page[work]
	until(w.t, "the issue's Work", func() bool {
		w.must("GET", "/v1/work?scope=t", nil, nil, &p)
		return len(p.Items) == 1
	})
	var x execution
	until(w.t, "the Work's execution", func() bool {
		exes := w.executions(p.Items[0].ID)
		if len(exes) > 0 {
			x = exes[0]
		}
		return len(exes) > 0
	})
	return p.Items[0], x
}

// segmentRecord reads the supervisor record of an execution's segment.
func (w *agentWorld) segmentPID(executionID string, epoch int64) int {
	w.t.Helper()
	path := filepath.Join(w.state, "executions", executionID, "segments", strconv.FormatInt(epoch, 10), "supervisor.json")
	var rec supervisorRecord
	until(w.t, "the supervisor record of "+executionID, func() bool {
		b, err := os.ReadFile(path)
		return err == nil && json.Unmarshal(b, &rec) == nil && rec.PID > 1
	})
	return rec.PID
}

// killAgentGroups ends the process group of every agent segment under
// state, so that a failed test leaves nothing running.
func killAgentGroups(state string) {
	files, _ := filepath.Glob(filepath.Join(state, "executions", "*", "segments", "*", "supervisor.json"))
	for _, path := range files {
		var rec supervisorRecord
		if b, err := os.ReadFile(path); err == nil && json.Unmarshal(b, &rec) == nil && rec.PID > 1 {
			_ = syscall.Kill(-rec.PID, syscall.SIGKILL)
		}
	}
}

// family lists root and every live process descended from it, whatever
// its group: an MCP server the CLI started in a group of its own counts.
// Zombies are left out: this machine's init may not reap them.
func family(root int) []int {
	var out []int
	for _, pid := range append([]int{root}, reaper.Descendants(root)...) {
		if st, err := proc.ReadProcStat(pid); err == nil && st.State != 'Z' && st.State != 'X' {
			out = append(out, pid)
		}
	}
	slices.Sort(out)
	return out
}

// searchState reads every regular file under the state directory (the
// SQLite files, artifacts, execution directories, run directories) and
// says which of them, relative to it, holds which canary (by index).
func searchState(t *testing.T, state string, canaries []string) (hits []string, files int) {
	t.Helper()
	err := filepath.WalkDir(state, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil // a file removed while the walk runs
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		files++
		for i, c := range canaries {
			if bytes.Contains(b, []byte(c)) {
				rel, _ := filepath.Rel(state, path)
				hits = append(hits, rel+" holds canary "+strconv.Itoa(i))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hits, files
}

// noCanary is the canary search: the model API key and every execution
// token the test saw appear in no file under the state directory, no
// artifact's content, no daemon log and no CLI output. It runs once the
// Work has ended (the run directory, and with it the live token file, is
// gone).
func (w *agentWorld) noCanary(executionID string) {
	w.t.Helper()
	tokens := w.seenTokens()
	if len(tokens) == 0 {
		w.t.Fatal("no execution token was seen to search for")
	}
	canaries := append([]string{modelKey}, tokens...)
	for _, c := range canaries {
		if len(c) < 16 {
			w.t.Fatalf("canary %d bytes long is too short to search for", len(c))
		}
	}
	// Control: the search finds what belongs there, the agent's session
	// (in the database, the transcript the execution directory keeps and
	// the stored transcript artifact), so a clean search means something.
	x := w.execution(executionID)
	control, _ := searchState(w.t, w.state, []string{x.Session})
	for _, where := range []string{"coordination.db", "artifacts" + string(filepath.Separator), filepath.Join("executions", executionID, "segments")} {
		if !slices.ContainsFunc(control, func(h string) bool { return strings.HasPrefix(h, where) }) {
			w.t.Errorf("control: the session %q is in none of %s*, only in %q", x.Session, where, control)
		}
	}
	hits, files := searchState(w.t, w.state, canaries)
	if files < 5 {
		w.t.Fatalf("only %d files under the state directory to search", files)
	}
	for _, h := range hits {
		w.t.Errorf("%s (0 is the model key, the others execution tokens)", h)
	}
	places := map[string]string{"the daemon logs": w.allLogs()}
	arts := w.artifacts(executionID)
	names := []string{}
	for _, a := range arts {
		names = append(names, a.Name)
		resp := w.must("GET", "/v1/artifacts/"+client.PathEscape(a.ID)+"/content", nil, nil, nil)
		places["artifact "+a.Name+" "+a.ID] = string(resp.Body)
	}
	if !slices.Contains(names, "transcript") || !slices.Contains(names, "log") {
		w.t.Errorf("artifacts %q, want a transcript and a log", names)
	}
	w.mu.Lock()
	places["the CLI's output"] = strings.Join(w.outputs, "\n")
	w.mu.Unlock()
	for where, text := range places {
		for i, c := range canaries {
			if strings.Contains(text, c) {
				what := "the model key"
				if i > 0 {
					what = "an execution token"
				}
				w.t.Errorf("%s appears in %s", what, where)
			}
		}
	}
}

// toolResult is the result of the i-th tool call of the script as the
// model server received it in a later request.
func (w *agentWorld) toolResult(i int) agenttest.Item {
	w.t.Helper()
	ids := w.srv.CallIDs()
	if i >= len(ids) {
		w.t.Fatalf("the script made %d calls, want at least %d", len(ids), i+1)
	}
	for _, r := range w.srv.Requests() {
		if it, ok := r.ToolResult(ids[i]); ok {
			return it
		}
	}
	w.t.Fatalf("no request carried the result of call %d (%s)", i, ids[i])
	return agenttest.Item{}
}

func (w *agentWorld) logSegments(executionID string) {
	files, _ := filepath.Glob(filepath.Join(w.state, "executions", executionID, "segments", "*", "*.log"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		w.t.Logf("%s:\n%s", f, strings.TrimSpace(string(b)))
	}
}

// The whole life of an agent: offered exactly its grant, it reads its
// context, has an emit outside the scope's families refused (and sees the
// refusal's code), emits an Event that lands with the execution as its
// source, waits (the execution parks with its session, the Work waits),
// is resumed on the same session by an operator's wake (the model server
// sees the earlier conversation), and declares the outcome the Work ends
// with. No secret or token is kept or printed anywhere.
func TestAgentRunsParksAndResumes(t *testing.T) {
	for _, cli := range agentCLIs {
		t.Run(cli.executor, func(t *testing.T) {
			w := newAgentWorld(t, cli, []agenttest.Step{
				agenttest.Call("mcp__os__read_context", nil),
				agenttest.Call("mcp__os__emit", map[string]any{"type": "deploy.done"}),
				agenttest.Call("mcp__os__emit", map[string]any{"type": "agent.answered", "data": map[string]any{"issue": 42}}),
				agenttest.Call("mcp__os__wait", map[string]any{"types": []string{"review.done"}}),
				agenttest.Reply("Waiting for the review."),
				agenttest.Call("mcp__os__declare_outcome", map[string]any{"outcome": "succeeded", "message": "answered issue 42"}),
				agenttest.Reply("Done."),
			})
			w.startDaemon()
			wk, x := w.issue()
			defer func() {
				if t.Failed() {
					w.logSegments(x.ID)
				}
			}()

			parked := w.untilExecution(x.ID, "parked", func(x agentExecution) bool { return x.State == "parked" || x.State == "finished" })
			if parked.State != "parked" || parked.Session == "" {
				t.Fatalf("the agent's wait left execution %+v, want it parked with a session", parked)
			}
			if got := w.getWork(wk.ID); got.State != "waiting" {
				t.Fatalf("the parked Work is %s, want waiting", got.State)
			}
			reqs := w.srv.Requests()
			if len(reqs) != 5 {
				t.Fatalf("the first turn made %d model requests, want 5", len(reqs))
			}
			if !slices.Equal(reqs[0].Tools, cli.tools()) {
				t.Errorf("the agent was offered %q, want exactly %q", reqs[0].Tools, cli.tools())
			}
			if ctx := w.toolResult(0); !strings.Contains(ctx.Text, "issue.opened") || !strings.Contains(ctx.Text, wk.ID) {
				t.Errorf("read_context's result %q lacks the Work and its input Event", ctx.Text)
			}
			refused := w.toolResult(1)
			if !strings.Contains(refused.Text, "forbidden") || (cli.executor == "claude-code" && !refused.IsError) {
				t.Errorf("the refused emit reached the agent as %+v, want a tool error carrying forbidden", refused)
			}
			rejected := w.toolbeltCalls(url.Values{"execution": {x.ID}, "kind": {"toolbelt.rejected"}})
			if len(rejected) != 1 || rejected[0].Operation != "emit" || rejected[0].Result != "forbidden" {
				t.Errorf("toolbelt refusals %+v, want the one emit, forbidden", rejected)
			}

			var evs page[eventRecord]
			w.ocJSON(&evs, "events", "list", "--execution", x.ID)
			if len(evs.Items) != 1 || evs.Items[0].Type != "agent.answered" || evs.Items[0].Source != "execution" ||
				evs.Items[0].Execution != x.ID || evs.Items[0].Work != wk.ID || !strings.Contains(string(evs.Items[0].Data), "42") {
				t.Errorf("the execution's Events %+v, want the one agent.answered it emitted", evs.Items)
			}
			for _, r := range reqs {
				if r.Session != parked.Session {
					t.Errorf("model request %d names session %q, want the recorded %q", r.Step, r.Session, parked.Session)
				}
			}

			var woken struct {
				Matched bool `json:"matched"`
			}
			w.ocJSON(&woken, "work", "wake", wk.ID, "--type", "review.done", "--data", `{"approved":true}`)
			if !woken.Matched {
				t.Fatal("work wake --type review.done did not match the agent's wait")
			}
			done := w.waitWork(wk.ID, "ended", func(w work) bool { return terminal(w.State) })
			if done.State != "succeeded" || done.OutcomeMessage != "answered issue 42" {
				t.Fatalf("the Work ended %s (%q), want succeeded with the declared message", done.State, done.OutcomeMessage)
			}
			fin := w.untilExecution(x.ID, "finished", func(x agentExecution) bool { return x.State == "finished" })
			if fin.Result != "succeeded" || fin.Session != parked.Session || fin.Epoch < 2 || fin.Usage == nil ||
				fin.Usage.InputTokens == 0 || fin.Usage.OutputTokens == 0 {
				t.Errorf("the finished execution %+v (usage %+v), want succeeded on the same session, resumed, with usage", fin, fin.Usage)
			}
			if exes := w.executions(wk.ID); len(exes) != 1 {
				t.Errorf("the Work has %d executions, want the one resumed", len(exes))
			}

			reqs = w.srv.Requests()
			if len(reqs) != 7 || !w.srv.Done() {
				t.Fatalf("the conversation had %d requests, want the script's 7", len(reqs))
			}
			resumed := reqs[5]
			if resumed.Session != parked.Session {
				t.Errorf("the resumed request names session %q, want %q", resumed.Session, parked.Session)
			}
			if !resumed.Has("text", "Answer issue #42") || !resumed.Has("text", "review.done") {
				t.Errorf("the resumed request lacks the first prompt or the waking Event: %+v", resumed.Items)
			}
			ids := w.srv.CallIDs()
			for i := 0; i < 4; i++ {
				if _, ok := resumed.ToolResult(ids[i]); !ok {
					t.Errorf("the resumed request does not carry the first turn's call %d (%s)", i, ids[i])
				}
			}
			if n := len(w.seenTokens()); n < 2 {
				t.Errorf("%d execution tokens seen, want the first segment's and the resume's rotated one", n)
			}
			w.noCanary(x.ID)
		})
	}
}

// kill -9 of the daemon while the agent waits on its model: the next
// daemon adopts the running agent (the same process), rotates its token
// (the old one is refused on its socket), and the agent's turn goes on
// through the new daemon to the outcome.
func TestAgentAdoptedAfterKill9(t *testing.T) {
	for _, cli := range agentCLIs {
		t.Run(cli.executor, func(t *testing.T) {
			release := make(chan struct{})
			w := newAgentWorld(t, cli, []agenttest.Step{
				agenttest.Call("mcp__os__read_context", nil),
				agenttest.Call("mcp__os__emit", map[string]any{"type": "agent.after_restart"}).Held(release),
				agenttest.Call("mcp__os__declare_outcome", map[string]any{"outcome": "succeeded", "message": "adopted"}),
				agenttest.Reply("Done."),
			})
			first := w.startDaemon()
			wk, x := w.issue()
			defer func() {
				if t.Failed() {
					w.logSegments(x.ID)
				}
			}()
			w.srv.Await(t, 2, guard) // the agent waits on the held answer
			pid := w.segmentPID(x.ID, 1)
			before := family(pid)
			if len(before) < 2 {
				t.Fatalf("the agent's supervisor %d has no running agent (%v)", pid, before)
			}
			oldToken := w.execToken(x.ID)

			first.kill()
			w.startDaemon()
			w.untilExecution(x.ID, "adopted", func(x agentExecution) bool { return x.Epoch == 2 && x.State == "running" })
			newToken := w.untilServedAgain(x.ID, oldToken)
			readContext := callBody(t, "read_context", map[string]any{}, nil)
			wantRefusal(t, "the old token on the adopted socket", sockDo(t, w.execSocket(x.ID), "POST", "/v1/toolbelt/call", oldToken, nil, readContext), 403, "forbidden")
			if newToken == oldToken {
				t.Fatal("the token was not rotated")
			}
			for _, p := range before {
				if !alive(p) {
					t.Errorf("process %d of the agent did not survive the daemon's kill", p)
				}
			}

			close(release)
			done := w.waitWork(wk.ID, "ended", func(w work) bool { return terminal(w.State) })
			if done.State != "succeeded" || done.OutcomeMessage != "adopted" {
				t.Fatalf("the adopted Work ended %s (%q), want succeeded, adopted", done.State, done.OutcomeMessage)
			}
			var evs page[eventRecord]
			w.ocJSON(&evs, "events", "list", "--execution", x.ID)
			if len(evs.Items) != 1 || evs.Items[0].Type != "agent.after_restart" || evs.Items[0].Source != "execution" {
				t.Errorf("the execution's Events %+v, want the one emitted through the new daemon", evs.Items)
			}
			// The operations' calls (os mcp's reading of the guidance at
			// its start is one too, at epoch 1).
			var calls []string
			for _, c := range w.toolbeltCalls(url.Values{"execution": {x.ID}, "kind": {"toolbelt.called"}}) {
				if slices.Contains(agentGrant, c.Operation) {
					calls = append(calls, c.Operation+"@"+strconv.FormatInt(c.Epoch, 10))
				}
			}
			if want := []string{"read_context@1", "emit@2", "declare_outcome@2"}; !slices.Equal(calls, want) {
				t.Errorf("toolbelt calls %q, want %q: the turn goes on through the new daemon", calls, want)
			}
			fin := w.untilExecution(x.ID, "finished", func(x agentExecution) bool { return x.State == "finished" })
			if fin.Result != "succeeded" || fin.Session == "" {
				t.Errorf("the adopted execution finished %+v, want succeeded with its session", fin)
			}
			if !slices.Contains(w.seenTokens(), oldToken) || !slices.Contains(w.seenTokens(), newToken) {
				t.Error("the canary search lacks the old or the rotated token")
			}
			w.noCanary(x.ID)
		})
	}
}

// work cancel while the agent waits on its model stops the agent's whole
// process group (its MCP server included) and records the physical stop.
func TestAgentCancelStopsItsGroup(t *testing.T) {
	for _, cli := range agentCLIs {
		t.Run(cli.executor, func(t *testing.T) {
			release := make(chan struct{})
			defer close(release)
			w := newAgentWorld(t, cli, []agenttest.Step{
				agenttest.Call("mcp__os__read_context", nil),
				agenttest.Reply("never sent").Held(release),
			})
			w.startDaemon()
			wk, x := w.issue()
			defer func() {
				if t.Failed() {
					w.logSegments(x.ID)
				}
			}()
			w.srv.Await(t, 2, guard)
			pid := w.segmentPID(x.ID, 1)
			procs := family(pid)
			if len(procs) < 3 || !groupAlive(pid) {
				t.Fatalf("the agent's processes %v, want the supervisor, the agent and its os mcp", procs)
			}

			if code, _, stderr := w.oc("work", "cancel", wk.ID, "--reason", "e2e"); code != 0 {
				t.Fatalf("work cancel: exit %d: %s", code, stderr)
			}
			if got := w.waitWork(wk.ID, "cancelled", func(w work) bool { return terminal(w.State) }); got.State != "cancelled" {
				t.Fatalf("the Work ended %s, want cancelled", got.State)
			}
			fin := w.untilExecution(x.ID, "finished", func(x agentExecution) bool { return x.State == "finished" })
			if fin.Result != "cancelled" || !strings.Contains(fin.Message, "stopped") {
				t.Errorf("the cancelled execution %+v, want it finished cancelled with its physical stop", fin)
			}
			// The stop is recorded only once the group is seen gone.
			if groupAlive(pid) {
				t.Errorf("the agent's process group %d outlived the recorded stop", pid)
			}
			until(t, "every process of the agent ending", func() bool {
				for _, p := range procs {
					if alive(p) {
						return false
					}
				}
				return true
			})
			w.noCanary(x.ID)
		})
	}
}

// A call outside the grant: while the agent waits on its model, an
// operator's config apply takes emit out of the scope's grant; the
// agent's next emit (its tool list was read at its start) is refused by
// the toolbelt, the agent sees the refusal's code in its tool result, and
// nothing is emitted. The agent then ends its turn without an outcome,
// and the Work ends by the executor's result.
func TestAgentSeesARefusalOutsideItsGrant(t *testing.T) {
	for _, cli := range agentCLIs {
		t.Run(cli.executor, func(t *testing.T) {
			release := make(chan struct{})
			w := newAgentWorld(t, cli, []agenttest.Step{
				agenttest.Call("mcp__os__read_context", nil),
				agenttest.Call("mcp__os__emit", map[string]any{"type": "agent.after_narrowing"}).Held(release),
				agenttest.Reply("The emit was refused."),
			})
			w.startDaemon()
			wk, x := w.issue()
			defer func() {
				if t.Failed() {
					w.logSegments(x.ID)
				}
			}()
			w.srv.Await(t, 2, guard)
			file := filepath.Join(w.root, "narrowed.json")
			if err := os.WriteFile(file, w.config([]string{"declare_outcome", "read_context", "wait"}), 0o600); err != nil {
				t.Fatal(err)
			}
			if code, out, stderr := w.oc("config", "apply", file); code != 0 {
				t.Fatalf("config apply: exit %d %q %q", code, out, stderr)
			}
			close(release)

			done := w.waitWork(wk.ID, "ended", func(w work) bool { return terminal(w.State) })
			if done.State != "succeeded" {
				t.Fatalf("the Work ended %s (%q), want succeeded by the agent's normal end", done.State, done.OutcomeMessage)
			}
			if reqs := w.srv.Requests(); len(reqs) != 3 || !w.srv.Done() {
				t.Fatalf("the conversation had %d requests, want the script's 3", len(reqs))
			}
			refused := w.toolResult(1)
			if !strings.Contains(refused.Text, "forbidden") || (cli.executor == "claude-code" && !refused.IsError) {
				t.Errorf("the refused emit reached the agent as %+v, want a tool error carrying forbidden", refused)
			}
			rejected := w.toolbeltCalls(url.Values{"execution": {x.ID}, "kind": {"toolbelt.rejected"}})
			if len(rejected) != 1 || rejected[0].Operation != "emit" || rejected[0].Result != "forbidden" {
				t.Errorf("toolbelt refusals %+v, want the one emit, forbidden", rejected)
			}
			var evs page[eventRecord]
			w.ocJSON(&evs, "events", "list", "--execution", x.ID)
			if len(evs.Items) != 0 {
				t.Errorf("the execution emitted %+v, want nothing", evs.Items)
			}
			w.noCanary(x.ID)
		})
	}
}
