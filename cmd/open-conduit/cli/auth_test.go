package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/internal/daemon"
	"github.com/open-conduit/open-conduit/internal/management"
	"github.com/open-conduit/open-conduit/internal/management/mgmttest"
	"github.com/open-conduit/open-conduit/internal/statedir"
)

// run runs the CLI in process and returns its exit code and output.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), args, Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}

// serve starts a test server and points the CLI's defaults at its state
// directory.
func serve(t *testing.T, opts mgmttest.Options) *mgmttest.Harness {
	t.Helper()
	h := mgmttest.Start(t, opts)
	t.Setenv(EnvState, h.StateDir)
	t.Setenv(EnvEndpoint, "")
	t.Setenv(EnvTokenFile, "")
	return h
}

func TestResolveTarget(t *testing.T) {
	t.Setenv("HOME", "/home/u")
	cases := []struct {
		name                        string
		env                         map[string]string
		args                        []string
		wantSocket, wantToken, from string
	}{
		{"home default", nil, nil, "/home/u/.local/state/open-conduit/management.sock", "/home/u/.local/state/open-conduit/private/operator.token", "the state directory"},
		{"xdg", map[string]string{"XDG_STATE_HOME": "/x/state"}, nil, "/x/state/open-conduit/management.sock", "/x/state/open-conduit/private/operator.token", "the state directory"},
		{"relative xdg ignored", map[string]string{"XDG_STATE_HOME": "rel"}, nil, "/home/u/.local/state/open-conduit/management.sock", "/home/u/.local/state/open-conduit/private/operator.token", "the state directory"},
		{"state env", map[string]string{EnvState: "/s", "XDG_STATE_HOME": "/x"}, nil, "/s/management.sock", "/s/private/operator.token", "the state directory"},
		{"endpoint env", map[string]string{EnvState: "/s", EnvEndpoint: "/e.sock"}, nil, "/e.sock", "/s/private/operator.token", "$" + EnvEndpoint},
		{"flags win", map[string]string{EnvEndpoint: "/e.sock", EnvTokenFile: "/t"}, []string{"--endpoint", "unix:///f.sock", "--token-file", "/ft"}, "/f.sock", "/ft", "--endpoint"},
		{"token env", map[string]string{EnvState: "/s", EnvTokenFile: "/t"}, nil, "/s/management.sock", "/t", "the state directory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{EnvState, EnvEndpoint, EnvTokenFile, "XDG_STATE_HOME"} {
				t.Setenv(k, tc.env[k])
			}
			root := NewRoot(Streams{Out: io.Discard, Err: io.Discard})
			cmd, _, err := root.Find([]string{"health"})
			if err != nil {
				t.Fatal(err)
			}
			if err := root.ParseFlags(tc.args); err != nil {
				t.Fatal(err)
			}
			cmd.Flags().AddFlagSet(root.PersistentFlags())
			got, err := resolveTarget(cmd)
			if err != nil {
				t.Fatal(err)
			}
			if got.socket != tc.wantSocket || got.tokenFile != tc.wantToken || !strings.HasPrefix(got.socketFrom, tc.from) {
				t.Fatalf("got %+v, want socket %s token %s from %s", got, tc.wantSocket, tc.wantToken, tc.from)
			}
		})
	}
}

func TestHealthCommand(t *testing.T) {
	h := serve(t, mgmttest.Options{Version: "9.9.9"})
	code, out, errs := run(t, "health")
	if code != 0 || !strings.Contains(out, "status") || !strings.Contains(out, "ok") || !strings.Contains(out, "9.9.9") {
		t.Fatalf("health: %d %q %q", code, out, errs)
	}
	// --json prints the API's object with the socket the table shows.
	code, out, _ = run(t, "--json", "health")
	resp, err := h.Client.Do(context.Background(), "GET", "/v1/health", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{}
	if err := json.Unmarshal(resp.Body, &want); err != nil {
		t.Fatal(err)
	}
	want["socket"] = h.Socket
	sameJSON := func(out string) bool {
		got := map[string]any{}
		return json.Unmarshal([]byte(out), &got) == nil && reflect.DeepEqual(got, want)
	}
	if code != 0 || !sameJSON(out) {
		t.Fatalf("health --json = %q, want the API body %q with the socket %s", out, resp.Body, h.Socket)
	}
	// The flags work after the command too, and an explicit endpoint and
	// token file are used.
	t.Setenv(EnvState, t.TempDir())
	code, out, errs = run(t, "health", "--endpoint", h.Socket, "--token-file", h.TokenFile, "--json")
	if code != 0 || !sameJSON(out) {
		t.Fatalf("health with flags: %d %q %q", code, out, errs)
	}
}

// An endpoint given as a URL is refused as a usage error that says the
// endpoint is a socket path; unix:// is taken as the path it names.
func TestEndpointURLIsRefused(t *testing.T) {
	h := serve(t, mgmttest.Options{})
	code, _, errs := run(t, "health", "--endpoint", "http://localhost:8080")
	if code != 2 || !strings.Contains(errs, "Unix socket") || !strings.Contains(errs, "--endpoint") {
		t.Fatalf("a URL endpoint: %d %q", code, errs)
	}
	t.Setenv(EnvEndpoint, "https://example.invalid/x")
	if code, _, errs := run(t, "health"); code != 2 || !strings.Contains(errs, "$"+EnvEndpoint) {
		t.Fatalf("a URL in the environment: %d %q", code, errs)
	}
	if code, out, errs := run(t, "health", "--endpoint", "unix://"+h.Socket); code != 0 || !strings.Contains(out, "ok") {
		t.Fatalf("unix:// endpoint: %d %q %q", code, out, errs)
	}
}

func TestClientErrorsSayWhatToDo(t *testing.T) {
	empty := mgmttest.NewStateDir(t)
	t.Setenv(EnvState, empty)
	t.Setenv(EnvEndpoint, "")
	t.Setenv(EnvTokenFile, "")
	// No token file yet: the daemon never ran here.
	code, _, errs := run(t, "health")
	if code != 1 || !strings.Contains(errs, "token file") || !strings.Contains(errs, "--token-file") {
		t.Fatalf("missing token file: %d %q", code, errs)
	}
	// The same for the commands that send a configuration document: the
	// document is fine, the token file is what is missing.
	doc := filepath.Join(empty, "config.json")
	os.WriteFile(doc, []byte(`{"version": 1}`), 0o600)
	for _, cmd := range []string{"validate", "apply"} {
		code, _, errs = run(t, "config", cmd, doc)
		if code != 1 || !strings.Contains(errs, "--token-file") || strings.Contains(errs, "not a configuration document") {
			t.Fatalf("config %s with a missing token file: %d %q", cmd, code, errs)
		}
	}
	// A token but no daemon.
	os.MkdirAll(filepath.Join(empty, "private"), 0o700)
	statedir.WriteTokenFile(statedir.OwnerTokenPath(empty), "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
	code, _, errs = run(t, "health")
	if code != 1 || !strings.Contains(errs, "is the daemon running? Start it with `open-conduit daemon`") {
		t.Fatalf("no daemon: %d %q", code, errs)
	}
	// A daemon that refuses the token.
	h := mgmttest.Start(t, mgmttest.Options{})
	code, _, errs = run(t, "health", "--endpoint", h.Socket)
	if code != 1 || !strings.Contains(errs, "auth recover") {
		t.Fatalf("refused token: %d %q", code, errs)
	}
	// Usage errors exit 2.
	for _, args := range [][]string{{"auth", "revoke"}, {"auth", "operators", "bogus"}, {"auth", "operators", "add", "x", "--role", "root"}, {"health", "extra"}, {"auth"}} {
		if code, _, errs := run(t, args...); code != 2 {
			t.Errorf("%v: exit %d (%q), want 2", args, code, errs)
		}
	}
}

func TestAuthOperatorsCommands(t *testing.T) {
	h := serve(t, mgmttest.Options{})
	code, out, errs := run(t, "auth", "operators", "add", "alice", "--role", "operate")
	if code != 0 || !strings.Contains(out, "will not be shown again") {
		t.Fatalf("add: %d %q %q", code, out, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	token := lines[len(lines)-1]
	aliceFile := filepath.Join(h.StateDir, "alice.token")
	statedir.WriteTokenFile(aliceFile, token)
	if _, err := h.ClientFor(aliceFile).Health(context.Background()); err != nil {
		t.Fatalf("printed token does not work: %v", err)
	}
	code, out, _ = run(t, "auth", "operators")
	if code != 0 || !strings.Contains(out, "alice") || !strings.Contains(out, "operate") || !strings.Contains(out, "local (owner)") {
		t.Fatalf("list: %d %q", code, out)
	}
	code, js, _ := run(t, "auth", "operators", "--json")
	for _, s := range []string{out, js} {
		if strings.Contains(s, token) || strings.Contains(s, h.OwnerToken(t)) {
			t.Fatal("listing shows a token")
		}
	}
	if code != 0 || !strings.HasPrefix(js, `{"items":[`) {
		t.Fatalf("list --json: %q", js)
	}
	// A non-admin cannot issue; the message names the role.
	code, _, errs = run(t, "--token-file", aliceFile, "auth", "operators", "add", "bob")
	if code != 1 || !strings.Contains(errs, "admin") {
		t.Fatalf("non-admin add: %d %q", code, errs)
	}
}

func TestAuthRotateAndRevokeCommands(t *testing.T) {
	h := serve(t, mgmttest.Options{})
	ctx := context.Background()
	old := h.OwnerToken(t)
	code, out, errs := run(t, "auth", "rotate")
	if code != 0 || !strings.Contains(out, h.TokenFile) || strings.Contains(out, h.OwnerToken(t)) {
		t.Fatalf("rotate: %d %q %q", code, out, errs)
	}
	if h.OwnerToken(t) == old {
		t.Fatal("token file not rewritten")
	}
	if _, err := client.New(h.Socket, client.StaticToken(old)).Health(ctx); !client.IsUnauthorized(err) {
		t.Fatalf("old token after rotate: %v", err)
	}
	if code, _, errs := run(t, "health"); code != 0 {
		t.Fatalf("health after rotate: %q", errs)
	}

	viewFile, viewIs := h.AddOperator(t, "viewer", management.RoleView)
	opFile, _ := h.AddOperator(t, "ops", management.RoleOperate)
	code, _, errs = run(t, "--token-file", opFile, "auth", "revoke", viewIs.Credential.ID)
	if code != 1 || !strings.Contains(errs, "admin") {
		t.Fatalf("operate revoking another: %d %q", code, errs)
	}
	code, out, errs = run(t, "auth", "revoke", viewIs.Credential.ID, "--idempotency-key", "cli-rv")
	if code != 0 || !strings.Contains(out, "Revoked "+viewIs.Credential.ID) {
		t.Fatalf("admin revoke: %d %q %q", code, out, errs)
	}
	if _, err := h.ClientFor(viewFile).Health(ctx); !client.IsUnauthorized(err) {
		t.Fatalf("revoked operator: %v", err)
	}
	// The same key replays.
	code, js, _ := run(t, "auth", "revoke", viewIs.Credential.ID, "--idempotency-key", "cli-rv", "--json")
	if code != 0 || !strings.Contains(js, `"revoked":true`) {
		t.Fatalf("replayed revoke: %d %q", code, js)
	}
}

func TestAuthRecoverCommand(t *testing.T) {
	creds := &mgmttest.Credentials{}
	dir := mgmttest.NewStateDir(t)
	h := serve(t, mgmttest.Options{StateDir: dir, Credentials: creds})
	prev := openCredentials
	t.Cleanup(func() { openCredentials = prev })
	openCredentials = func(context.Context, daemon.StoreOptions) (management.Credentials, io.Closer, error) {
		return creds, io.NopCloser(nil), nil
	}
	// Lose a rotation response.
	if _, err := h.Client.Rotate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := run(t, "health"); code != 1 {
		t.Fatal("owner token still works after a lost rotation")
	}
	// The daemon holds the lock.
	code, _, errs := run(t, "auth", "recover")
	if code != 1 || !strings.Contains(errs, "daemon stopped") || !strings.Contains(errs, "process") {
		t.Fatalf("recover with the lock held: %d %q", code, errs)
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run(t, "auth", "recover", "--state", dir)
	if code != 0 || !strings.Contains(out, statedir.OwnerTokenPath(dir)) {
		t.Fatalf("recover: %d %q %q", code, out, errs)
	}
	serve(t, mgmttest.Options{StateDir: dir, Credentials: creds})
	if code, out, errs := run(t, "health"); code != 0 {
		t.Fatalf("health after recovery: %q %q", out, errs)
	}
	// No state directory at all.
	if code, _, errs := run(t, "auth", "recover", "--state", filepath.Join(dir, "nope")); code != 1 || !strings.Contains(errs, "no state directory") {
		t.Fatalf("recover without a state dir: %d %q", code, errs)
	}
}

// auth operators pages through the list helper: --limit, the "more:" hint
// on the error stream with the --cursor to pass, and the same table.
func TestAuthOperatorsPages(t *testing.T) {
	h := serve(t, mgmttest.Options{})
	h.Clock.Advance(time.Second)
	h.AddOperator(t, "zed", management.RoleOperate)
	h.Clock.Advance(time.Second)
	h.AddOperator(t, "amy", management.RoleView)
	more := regexp.MustCompile(`^more: open-conduit auth operators --cursor (\S+) \(with the same filters\)\n$`)
	var names []string
	args := []string{"auth", "operators", "--limit", "2"}
	for pages := 1; ; pages++ {
		code, out, errs := run(t, args...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 0 || !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[0], "TOKEN ID") {
			t.Fatalf("page %d: %d %q %q", pages, code, out, errs)
		}
		for _, l := range lines[1:] {
			names = append(names, strings.Fields(l)[0])
		}
		m := more.FindStringSubmatch(errs)
		if m == nil {
			if errs != "" || pages != 2 {
				t.Fatalf("last page %d said %q on the error stream", pages, errs)
			}
			break
		}
		args = []string{"auth", "operators", "--limit", "2", "--cursor", m[1]}
	}
	// Oldest first: the owner, then in the order they were issued.
	if strings.Join(names, " ") != "local zed amy" {
		t.Errorf("listed %v, want local zed amy", names)
	}
	code, _, errs := run(t, "auth", "operators", "--cursor", "garbage")
	if code != 1 || !strings.Contains(errs, "invalid_cursor") {
		t.Errorf("bad cursor: %d %q", code, errs)
	}
	code, js, _ := run(t, "auth", "operators", "--limit", "1", "--json")
	if code != 0 || !strings.Contains(js, `"next_cursor":"`) {
		t.Errorf("--json page: %d %q", code, js)
	}
}

// auth operators lists the active credentials; --all lists the revoked
// ones too, marked revoked, and pages with its own cursor.
func TestAuthOperatorsAll(t *testing.T) {
	h := serve(t, mgmttest.Options{})
	h.Clock.Advance(time.Second)
	_, gone := h.AddOperator(t, "gone", management.RoleView)
	if err := h.Credentials.Revoke(context.Background(), gone.Credential.ID, h.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	h.Clock.Advance(time.Second)
	h.AddOperator(t, "kept", management.RoleView)
	code, out, errs := run(t, "auth", "operators")
	if code != 0 || strings.Contains(out, "gone") || !strings.Contains(out, "kept") || strings.Contains(out, "revoked") {
		t.Fatalf("default listing: %d %q %q", code, out, errs)
	}
	code, out, errs = run(t, "auth", "operators", "--all")
	if code != 0 || !strings.Contains(out, gone.Credential.ID) || !strings.Contains(out, "revoked") || !strings.Contains(out, "kept") {
		t.Fatalf("--all listing: %d %q %q", code, out, errs)
	}
	more := regexp.MustCompile(`--cursor (\S+)`)
	var names []string
	args := []string{"auth", "operators", "--all", "--limit", "2"}
	for {
		code, out, errs := run(t, args...)
		if code != 0 {
			t.Fatalf("%v: %d %q", args, code, errs)
		}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
			names = append(names, strings.Fields(l)[0])
		}
		m := more.FindStringSubmatch(errs)
		if m == nil {
			break
		}
		args = []string{"auth", "operators", "--all", "--limit", "2", "--cursor", m[1]}
	}
	if strings.Join(names, " ") != "local gone kept" {
		t.Errorf("--all pages listed %v, want local gone kept", names)
	}
}
