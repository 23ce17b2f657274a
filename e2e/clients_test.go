package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// gitServer is a git server over the dumb HTTP protocol that lets in only
// the one Basic credential it expects, and records what it was sent.
type gitServer struct {
	user, password string
	mu             sync.Mutex
	anonymous      int // requests without a credential
	wrong          int // requests with another credential
	admitted       int
}

const gitRef = "1d3a8ad6e6f4b2c0a4e1f9c5d7b3a2e1f0c9d8b7"

func (g *gitServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u, p, ok := r.BasicAuth()
	g.mu.Lock()
	switch {
	case !ok:
		g.anonymous++
	case u != g.user || p != g.password:
		g.wrong++
		ok = false
	default:
		g.admitted++
	}
	g.mu.Unlock()
	if !ok {
		w.Header().Set("WWW-Authenticate", `Basic realm="e2e"`)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	switch r.URL.Path {
	case "/repo.git/info/refs":
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "%s\trefs/heads/main\n", gitRef)
	case "/repo.git/HEAD":
		fmt.Fprint(w, "ref: refs/heads/main\n")
	default:
		http.NotFound(w, r)
	}
}

func (g *gitServer) counts() (anonymous, wrong, admitted int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.anonymous, g.wrong, g.admitted
}

// Real git, configured with `os git-credential` as its only credential
// helper and run by the shell job itself, obtains its credential from the
// operation that serves git.credential on the daemon (the test daemon's
// e2ecred.credential), and the server admits it with it. Without the
// helper the same git is refused, so the credential came from the
// toolbelt.
func TestGitGetsItsCredentialThroughOsGitCredential(t *testing.T) {
	var pw [12]byte
	_, _ = rand.Read(pw[:])
	password := "pw" + hex.EncodeToString(pw[:])
	e := newEnv(t)
	ctl := e.writeAgentConfig(append([]string{"e2ecred.credential"}, agentOps...))
	e.startTestDaemon("E2E_GIT_PASSWORD=" + password)
	w := e.createWork("t")
	x := e.runningExecution(w.ID)
	a := agentOf(t, ctl, x.ID)

	srv := &gitServer{user: "x-access-token", password: password + "-" + w.ID}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	repo := hs.URL + "/repo.git"
	// A git with no configuration of the machine's or the user's, that
	// never prompts.
	git := `HOME="$PWD" GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 GIT_ASKPASS= SSH_ASKPASS= git -c credential.helper= `

	// Control: without a helper, git has no credential and is refused.
	code, out, stderr := a.sh(git + "ls-remote " + repo)
	if code == 0 || strings.Contains(out, gitRef) {
		t.Fatalf("git without a helper: exit %d %q %q, want a refusal", code, out, stderr)
	}
	if anon, wrong, admitted := srv.counts(); anon == 0 || wrong != 0 || admitted != 0 {
		t.Fatalf("without a helper the server saw %d anonymous, %d wrong, %d admitted requests", anon, wrong, admitted)
	}

	code, out, stderr = a.sh(git + `-c 'credential.helper=!os git-credential' ls-remote ` + repo)
	if code != 0 || !strings.Contains(out, gitRef+"\trefs/heads/main") {
		t.Fatalf("git with os git-credential: exit %d\n%s\n%s", code, out, stderr)
	}
	if _, wrong, admitted := srv.counts(); wrong != 0 || admitted == 0 {
		t.Fatalf("the server admitted %d requests and refused %d wrong credentials", admitted, wrong)
	}
	calls := e.toolbeltCalls(url.Values{"execution": {x.ID}, "kind": {"toolbelt.called"}})
	var served, asked bool
	for _, c := range calls {
		served = served || (c.Operation == "e2ecred.credential" && c.Result == "ok")
		asked = asked || c.Operation == "toolbelt.serving"
	}
	if !served || !asked {
		t.Errorf("calls %+v, want os to have asked which operation serves git.credential and called it", calls)
	}
	a.exit(0)
	if w := e.waitWork(w.ID, "terminal", func(w work) bool { return terminal(w.State) }); w.State != "succeeded" {
		t.Fatalf("Work ended %s", w.State)
	}
	// The password never reached a log.
	if strings.Contains(e.allLogs(), password) {
		t.Error("the credential's password appears in the daemon's log")
	}
}

// An MCP client built on the Go SDK runs os mcp with an execution's
// environment: its tools are exactly the token's granted operations, its
// instructions the guidance; a call of emit is recorded by the daemon as
// the execution's Event, a refusal comes back as a tool error, and a
// repeated _request_id replays the first call.
func TestMCPClientListsAndCallsTheGrantedOperations(t *testing.T) {
	e := newEnv(t)
	ctl := e.writeAgentConfig(agentOps)
	e.start()
	w := e.createWork("t")
	x := e.runningExecution(w.ID)
	a := agentOf(t, ctl, x.ID) // keeps the attempt live

	ctx, cancel := within()
	defer cancel()
	cmd := exec.Command(bins.os, "mcp")
	cmd.Env = e.osEnv(x.ID)
	session, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connecting to os mcp: %v", err)
	}
	defer session.Close()
	if ins := session.InitializeResult().Instructions; strings.TrimSpace(ins) == "" {
		t.Error("os mcp gave no instructions")
	}
	tools, err := session.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, agentOps) {
		t.Fatalf("tools %v, want the granted operations %v", names, agentOps)
	}

	emit := func(args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "emit", Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	text := func(res *mcp.CallToolResult) string {
		t.Helper()
		if len(res.Content) != 1 {
			t.Fatalf("a tool result with %d contents", len(res.Content))
		}
		tc, ok := res.Content[0].(*mcp.TextContent)
		if !ok {
			t.Fatalf("a tool result of %T", res.Content[0])
		}
		return tc.Text
	}
	res := emit(map[string]any{"type": "mcp.hello", "data": map[string]any{"via": "mcp"}, "_request_id": "mcp-e2e-1"})
	if res.IsError {
		t.Fatalf("emit through MCP refused: %s", text(res))
	}
	var out struct {
		EventID string `json:"event_id"`
	}
	if err := json.Unmarshal([]byte(text(res)), &out); err != nil || out.EventID == "" {
		t.Fatalf("emit through MCP answered %q (%v)", text(res), err)
	}
	ev := e.event(out.EventID)
	if ev.Type != "mcp.hello" || ev.Source != "execution" || ev.Execution != x.ID || ev.Work != w.ID || ev.Actor != "" || string(ev.Data) != `{"via":"mcp"}` {
		t.Fatalf("the daemon recorded %+v, want the execution's mcp.hello", ev)
	}
	// The same _request_id and arguments replay the first call.
	again := emit(map[string]any{"type": "mcp.hello", "data": map[string]any{"via": "mcp"}, "_request_id": "mcp-e2e-1"})
	if again.IsError || text(again) != text(res) {
		t.Fatalf("a repeated call answered %q, want the first result %q", text(again), text(res))
	}
	// A refusal is a tool error the model can read.
	refused := emit(map[string]any{"type": "core.forged"})
	if !refused.IsError || !strings.HasPrefix(text(refused), "invalid_request:") {
		t.Fatalf("a core type through MCP: error=%v %q, want a tool error invalid_request", refused.IsError, text(refused))
	}
	var evs page[eventRecord]
	e.cliJSON(&evs, "events", "list", "--execution", x.ID)
	if len(evs.Items) != 1 {
		t.Fatalf("the execution's Events %+v, want the one mcp.hello", evs.Items)
	}
	a.exit(0)
	e.waitWork(w.ID, "terminal", func(w work) bool { return terminal(w.State) })
}
