package oscli

import (
	"context"
	"encoding/json"
	"fmt"
	"go.uber.org/goleak"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/open-conduit/open-conduit/osclient"
)

// osBinary is the real os binary, built once for the package's tests.
var osBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "osbin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	osBinary = filepath.Join(dir, "os")
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	build := exec.Command(goTool, "build", "-o", osBinary, "github.com/open-conduit/open-conduit/cmd/os")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build the os binary:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		// No test may leave a goroutine running.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// childEnv is a minimal environment for a child process, plus the toolbelt's.
func childEnv(t testing.TB, tb *toolbeltDouble, extra ...string) []string {
	home := t.TempDir()
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0",
		"LANG=C",
	}
	for k, v := range tb.env() {
		env = append(env, k+"="+v)
	}
	return append(env, extra...)
}

func gitCmd(t *testing.T, ctx context.Context, dir string, env []string, stdin string, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

func TestRealGitCredentialHelper(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a failure guard only
	defer cancel()
	tb := newToolbelt(t)
	tb.mu.Lock()
	tb.ops = append(tb.ops, osclient.Operation{Name: "test.git.credential", Summary: "A git credential.", Capabilities: []string{"git.credential"}})
	tb.mu.Unlock()
	var asked []json.RawMessage
	tb.answer("test.git.credential", func(in json.RawMessage) (int, any) {
		asked = append(asked, in)
		return 200, map[string]string{"username": "x-access-token", "password": "ghs_fromthetoolbelt"}
	})

	repo := t.TempDir()
	env := childEnv(t, tb)
	for _, args := range [][]string{
		{"init", "-q"},
		{"config", "credential.helper", "!" + osBinary + " git-credential"},
		{"config", "credential.useHttpPath", "true"},
	} {
		if _, stderr, err := gitCmd(t, ctx, repo, env, "", args...); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, stderr)
		}
	}
	out, stderr, err := gitCmd(t, ctx, repo, env, "protocol=https\nhost=github.com\npath=acme/widgets.git\n\n", "credential", "fill")
	if err != nil {
		t.Fatalf("git credential fill: %v: %s", err, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if !slices.Contains(lines, "username=x-access-token") || !slices.Contains(lines, "password=ghs_fromthetoolbelt") {
		t.Fatalf("git credential fill printed:\n%s", out)
	}
	tb.mu.Lock()
	n := len(asked)
	var input map[string]any
	if n > 0 {
		json.Unmarshal(asked[0], &input)
	}
	tb.mu.Unlock()
	if n != 1 {
		t.Fatalf("the credential operation was called %d times", n)
	}
	want := map[string]any{"protocol": "https", "host": "github.com", "path": "acme/widgets.git"}
	if fmt.Sprint(input) != fmt.Sprint(want) {
		t.Errorf("the operation got %v, want %v", input, want)
	}
	for _, tok := range tb.tokens() {
		if strings.Contains(out+stderr, tok) {
			t.Fatal("git's output holds the execution token")
		}
	}
}

func TestRealGitFallsThroughWhenNothingServes(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tb := newToolbelt(t) // grants nothing that serves git.credential
	repo := t.TempDir()
	env := childEnv(t, tb)
	for _, args := range [][]string{
		{"init", "-q"},
		{"config", "--add", "credential.helper", "!" + osBinary + " git-credential"},
		{"config", "--add", "credential.helper", "!f() { echo username=next-helper; echo password=from-the-next-helper; }; f"},
	} {
		if _, stderr, err := gitCmd(t, ctx, repo, env, "", args...); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, stderr)
		}
	}
	out, stderr, err := gitCmd(t, ctx, repo, env, "protocol=https\nhost=example.com\n\n", "credential", "fill")
	if err != nil {
		t.Fatalf("git credential fill: %v: %s", err, stderr)
	}
	if !strings.Contains(out, "password=from-the-next-helper") {
		t.Fatalf("git did not fall through to the next helper:\n%s\n%s", out, stderr)
	}
	if got := tb.last(); got.Path != "/v1/toolbelt/serving" {
		t.Errorf("os git-credential did not ask what serves git.credential (last: %s)", got.Path)
	}
}

func TestRealMCPClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a failure guard only
	defer cancel()
	tb := newToolbelt(t)
	cmd := exec.Command(osBinary, "mcp")
	cmd.Env = childEnv(t, tb)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "oscli-test", Version: "1"}, nil)
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to os mcp: %v (stderr: %s)", err, stderr.String())
	}
	defer session.Close()

	// The instructions are the overall guidance, then each granted
	// operation's own under its name (only test.echo has one here).
	if got, want := session.InitializeResult().Instructions, tb.guidance+"\n\n## test.echo\n\nReturns its input."; got != want {
		t.Errorf("instructions = %q, want %q", got, want)
	}
	tools, err := session.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		if tool.Name == "test.echo" {
			if tool.Description != "Echo the input.\n\nReturns its input." {
				t.Errorf("test.echo's description = %q", tool.Description)
			}
			schema, _ := json.Marshal(tool.InputSchema)
			if !strings.Contains(string(schema), `"text"`) || !strings.Contains(string(schema), RequestIDArgument) {
				t.Errorf("test.echo's schema = %s", schema)
			}
		}
	}
	slices.Sort(names)
	if want := []string{"declare_outcome", "emit", "test.echo", "wait"}; !slices.Equal(names, want) {
		t.Fatalf("tools = %v, want %v", names, want)
	}

	// A call becomes a toolbelt call with a fresh request ID.
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "test.echo", Arguments: map[string]any{"text": "over mcp"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || len(res.Content) != 1 {
		t.Fatalf("result = %+v", res)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; fmt.Sprint(jsonOf(t, text)) != fmt.Sprint(map[string]any{"echo": map[string]any{"text": "over mcp"}}) {
		t.Errorf("result text = %s", text)
	}
	first := tb.last()
	wantID, _ := body(t, first, "request_id").(string)
	if first.Path != "/v1/toolbelt/call" || body(t, first, "operation") != "test.echo" || !strings.HasPrefix(wantID, "mcp_") {
		t.Fatalf("the toolbelt saw %s %v", first.Path, first.Body)
	}
	if fmt.Sprint(body(t, first, "input")) != fmt.Sprint(map[string]any{"text": "over mcp"}) {
		t.Errorf("input = %v", body(t, first, "input"))
	}
	if _, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "test.echo", Arguments: map[string]any{"text": "over mcp"}}); err != nil {
		t.Fatal(err)
	}
	if again, _ := body(t, tb.last(), "request_id").(string); again == wantID || !strings.HasPrefix(again, "mcp_") {
		t.Errorf("two calls shared request ID %q", again)
	}

	// A request ID in the arguments is used, and taken out of the input.
	res, err = session.CallTool(ctx, &mcp.CallToolParams{Name: "test.echo", Arguments: map[string]any{"text": "retry me", RequestIDArgument: "agent-1"}})
	if err != nil || res.IsError {
		t.Fatalf("call with a request ID: %+v, %v", res, err)
	}
	if last := tb.last(); body(t, last, "request_id") != "agent-1" || fmt.Sprint(body(t, last, "input")) != fmt.Sprint(map[string]any{"text": "retry me"}) {
		t.Errorf("the toolbelt saw %v", last.Body)
	}

	// The token rotates under the running server; the next call carries the
	// new one.
	rotated := tb.rotate()
	if _, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "emit", Arguments: map[string]any{"type": "mcp.step"}}); err != nil {
		t.Fatal(err)
	}
	if tb.last().Bearer != rotated {
		t.Error("os mcp did not re-read the rotated token")
	}

	// A refusal is a tool error with its code and message.
	tb.answer("test.echo", func(json.RawMessage) (int, any) {
		return 422, [2]string{"test_unavailable", "the test service is down"}
	})
	res, err = session.CallTool(ctx, &mcp.CallToolParams{Name: "test.echo", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || len(res.Content) != 1 {
		t.Fatalf("a refusal came back as %+v", res)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, "test_unavailable") || !strings.Contains(text, "the test service is down") {
		t.Errorf("the tool error says %q", text)
	}
	if err := session.Close(); err != nil {
		t.Errorf("closing the session: %v (stderr: %s)", err, stderr.String())
	}
	for _, tok := range tb.tokens() {
		if strings.Contains(stderr.String(), tok) {
			t.Fatal("os mcp wrote the token to stderr")
		}
	}
}

func TestRealMCPRefusesToStartWithoutAuthority(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tb := newToolbelt(t)
	tb.mu.Lock()
	tb.token = "revoked-everything"
	tb.mu.Unlock()
	cmd := exec.CommandContext(ctx, osBinary, "mcp")
	cmd.Env = childEnv(t, tb)
	cmd.Stdin = strings.NewReader("")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != ExitFailed {
		t.Fatalf("os mcp with a refused token: %v, %s", err, out)
	}
	if !strings.Contains(string(out), "unauthorized") {
		t.Errorf("os mcp said %q", out)
	}
}

// BenchmarkProcessEmit measures what a shell step pays for one emit: start
// the real os binary, read the token file, call over the socket, exit.
func BenchmarkProcessEmit(b *testing.B) {
	tb := newToolbelt(b)
	env := childEnv(b, tb)
	for b.Loop() {
		cmd := exec.Command(osBinary, "emit", "bench.tick")
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
	}
}
