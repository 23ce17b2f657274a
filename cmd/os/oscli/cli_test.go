package oscli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/osclient"
)

type result struct {
	code     int
	out, err string
}

// run runs os in process with the double's environment (plus extra) and
// stdin, and checks that no token the double issued appears in its output.
func run(t *testing.T, tb *toolbeltDouble, env map[string]string, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	getenv := func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		if tb != nil {
			return tb.env()[k]
		}
		return ""
	}
	code := Main(context.Background(), args, Streams{In: strings.NewReader(stdin), Out: &out, Err: &errb, Getenv: getenv})
	r := result{code: code, out: out.String(), err: errb.String()}
	if tb != nil {
		for _, tok := range tb.tokens() {
			if strings.Contains(r.out, tok) || strings.Contains(r.err, tok) {
				t.Fatalf("os %v printed a token:\nstdout: %s\nstderr: %s", args, r.out, r.err)
			}
		}
	}
	return r
}

// body decodes one member of a request body.
func body(t *testing.T, req seenRequest, key string) any {
	t.Helper()
	raw, ok := req.Body[key]
	if !ok {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func jsonOf(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON: %q: %v", s, err)
	}
	return v
}

func wantRequest(t *testing.T, got seenRequest, tb *toolbeltDouble, wantBody map[string]any) {
	t.Helper()
	if got.Method != "POST" || got.Path != "/v1/toolbelt/call" {
		t.Errorf("request = %s %s, want POST /v1/toolbelt/call", got.Method, got.Path)
	}
	if got.ContentType != "application/json" {
		t.Errorf("Content-Type = %q", got.ContentType)
	}
	if got.Bearer != tb.token {
		t.Errorf("the request did not carry the current token")
	}
	gotBody := map[string]any{}
	for k := range got.Body {
		gotBody[k] = body(t, got, k)
	}
	if !reflect.DeepEqual(gotBody, wantBody) {
		t.Errorf("body = %v, want %v", gotBody, wantBody)
	}
}

func TestCall(t *testing.T) {
	tb := newToolbelt(t)
	file := filepath.Join(t.TempDir(), "in.json")
	if err := os.WriteFile(file, []byte(`{"text":"from a file"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		input any
	}{
		{"literal", "", []string{"call", "test.echo", "--input", `{"text":"hi"}`}, map[string]any{"text": "hi"}},
		{"file", "", []string{"call", "test.echo", "--input", "@" + file}, map[string]any{"text": "from a file"}},
		{"stdin", `{"text":"piped"}`, []string{"call", "test.echo", "--input", "-"}, map[string]any{"text": "piped"}},
		{"no input", "", []string{"call", "test.echo"}, map[string]any{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, tb, nil, tc.stdin, tc.args...)
			if r.code != ExitOK {
				t.Fatalf("exit %d: %s", r.code, r.err)
			}
			wantRequest(t, tb.last(), tb, map[string]any{"operation": "test.echo", "input": tc.input})
			if got, want := jsonOf(t, r.out), map[string]any{"echo": tc.input}; !reflect.DeepEqual(got, want) {
				t.Errorf("printed %v, want %v", got, want)
			}
			if !strings.HasSuffix(r.out, "}\n") || !strings.Contains(r.out, "\n  ") {
				t.Errorf("the result is not printed indented: %q", r.out)
			}
		})
	}
}

func TestCallRequestIDAndAssertions(t *testing.T) {
	tb := newToolbelt(t)
	args := []string{"call", "test.echo", "--input", `{"text":"once"}`, "--request-id", "req-1",
		"--scope-id", "scp_1", "--work-id", "wrk_1", "--execution-id", "exe_01TEST"}
	first := run(t, tb, nil, "", args...)
	if first.code != ExitOK {
		t.Fatalf("exit %d: %s", first.code, first.err)
	}
	wantRequest(t, tb.last(), tb, map[string]any{
		"operation": "test.echo", "input": map[string]any{"text": "once"}, "request_id": "req-1",
		"scope_id": "scp_1", "work_id": "wrk_1", "execution_id": "exe_01TEST",
	})
	if strings.Contains(first.err, "replayed") {
		t.Errorf("a first call is reported as a replay: %s", first.err)
	}
	again := run(t, tb, nil, "", args...)
	if again.code != ExitOK || again.out != first.out {
		t.Fatalf("the repeat: exit %d, %q, want %q", again.code, again.out, first.out)
	}
	if !strings.Contains(again.err, "replayed") {
		t.Errorf("the repeat is not reported as a replay: %q", again.err)
	}
}

func TestEmit(t *testing.T) {
	tb := newToolbelt(t)
	r := run(t, tb, nil, "", "emit", "build.done", "--data", `{"ok":true}`, "--correlation-key", "pr-7", "--request-id", "r-emit")
	if r.code != ExitOK {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	wantRequest(t, tb.last(), tb, map[string]any{
		"operation":  "emit",
		"input":      map[string]any{"type": "build.done", "data": map[string]any{"ok": true}, "correlation_key": "pr-7"},
		"request_id": "r-emit",
	})
	if r.out != "evt_1\n" {
		t.Errorf("printed %q, want the event ID", r.out)
	}
	r = run(t, tb, nil, `[1,2]`, "emit", "build.step", "--data", "-", "--json")
	if r.code != ExitOK {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	wantRequest(t, tb.last(), tb, map[string]any{
		"operation": "emit", "input": map[string]any{"type": "build.step", "data": []any{1.0, 2.0}},
	})
	if got := jsonOf(t, r.out); !reflect.DeepEqual(got, map[string]any{"event_id": "evt_2", "seq": 2.0}) {
		t.Errorf("--json printed %v", got)
	}
}

func TestWait(t *testing.T) {
	tb := newToolbelt(t)
	r := run(t, tb, nil, "", "wait", "--type", "ci.done", "--type", "review.done", "--key", "pr-7", "--timeout", "10m", "--request-id", "w1")
	if r.code != ExitOK {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	wantRequest(t, tb.last(), tb, map[string]any{
		"operation":  "wait",
		"input":      map[string]any{"types": []any{"ci.done", "review.done"}, "keys": []any{"pr-7"}, "timeout": "10m"},
		"request_id": "w1",
	})
	if !strings.Contains(r.out, "Wait declared") || !strings.Contains(r.out, "Exit now") {
		t.Errorf("printed %q", r.out)
	}
	// The declaration released authority: the next call says so and what
	// to do.
	r = run(t, tb, nil, "", "emit", "late.event")
	if r.code != ExitFailed {
		t.Fatalf("a call after the declaration: exit %d", r.code)
	}
	if !strings.Contains(r.err, "authority_released") || !strings.Contains(r.err, "declaration landed") || !strings.Contains(r.err, "exit now") {
		t.Errorf("stderr %q does not explain the released authority", r.err)
	}
}

func TestWaitJSON(t *testing.T) {
	tb := newToolbelt(t)
	r := run(t, tb, nil, "", "wait", "--json")
	if r.code != ExitOK {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	wantRequest(t, tb.last(), tb, map[string]any{"operation": "wait", "input": map[string]any{}})
	if got := jsonOf(t, r.out).(map[string]any); got["declared"] != "wait" {
		t.Errorf("--json printed %v", got)
	}
}

func TestOutcome(t *testing.T) {
	tb := newToolbelt(t)
	r := run(t, tb, nil, "", "outcome", "failed", "--message", "tests broke", "--data", `{"failed":3}`, "--request-id", "o1")
	if r.code != ExitOK {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	wantRequest(t, tb.last(), tb, map[string]any{
		"operation":  "declare_outcome",
		"input":      map[string]any{"outcome": "failed", "message": "tests broke", "data": map[string]any{"failed": 3.0}},
		"request_id": "o1",
	})
	if !strings.Contains(r.out, "Outcome failed declared") {
		t.Errorf("printed %q", r.out)
	}
}

func TestGuidance(t *testing.T) {
	tb := newToolbelt(t)
	r := run(t, tb, nil, "", "guidance")
	if r.code != ExitOK {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	last := tb.last()
	if last.Method != "GET" || last.Path != "/v1/toolbelt/guidance" || last.Bearer != tb.token {
		t.Errorf("request = %s %s", last.Method, last.Path)
	}
	for _, want := range []string{"# Toolbelt", "Call emit to report progress.", "### test.echo", "Echo the input.", "Returns its input.", `"text"`} {
		if !strings.Contains(r.out, want) {
			t.Errorf("guidance output lacks %q:\n%s", want, r.out)
		}
	}
	r = run(t, tb, nil, "", "guidance", "--json")
	if r.code != ExitOK {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	doc := jsonOf(t, r.out).(map[string]any)
	if doc["guidance"] != tb.guidance || len(doc["operations"].([]any)) != len(tb.ops) {
		t.Errorf("--json printed %v", doc)
	}
}

func TestTokenFileReReadOnEveryCall(t *testing.T) {
	tb := newToolbelt(t)
	first := tb.token
	if r := run(t, tb, nil, "", "emit", "one.event"); r.code != ExitOK {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	if got := tb.last().Bearer; got != first {
		t.Fatal("the first call did not carry the first token")
	}
	second := tb.rotate()
	if second == first {
		t.Fatal("the rotation issued the same token")
	}
	if r := run(t, tb, nil, "", "emit", "two.event"); r.code != ExitOK {
		t.Fatalf("after the rotation: exit %d: %s", r.code, r.err)
	}
	if got := tb.last().Bearer; got != second {
		t.Fatal("the call after the rotation did not carry the new token")
	}
}

func TestClientReReadsTokenWithinOneProcess(t *testing.T) {
	// The MCP server is one long process: its client must read the file
	// for each call, not once.
	tb := newToolbelt(t)
	c, err := osclient.New(tb.ep.Socket, tb.ep.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Call(ctx, osclient.CallRequest{Operation: "emit", Input: json.RawMessage(`{"type":"a.b"}`)}); err != nil {
		t.Fatal(err)
	}
	first := tb.last().Bearer
	tb.rotate()
	if _, err := c.Call(ctx, osclient.CallRequest{Operation: "emit", Input: json.RawMessage(`{"type":"a.b"}`)}); err != nil {
		t.Fatal(err)
	}
	if second := tb.last().Bearer; second == first || second != tb.token {
		t.Fatal("the second call of one client did not carry the rotated token")
	}
}

func TestIdempotencyKeyHeader(t *testing.T) {
	tb := newToolbelt(t)
	c, err := osclient.New(tb.ep.Socket, tb.ep.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := osclient.CallRequest{Operation: "test.echo", Input: json.RawMessage(`{"text":"x"}`), IdempotencyKey: "key-1"}
	if _, err := c.Call(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if got := tb.last(); got.IdempotencyKey != "key-1" || got.Body["request_id"] != nil {
		t.Errorf("Idempotency-Key %q, body %v", got.IdempotencyKey, got.Body)
	}
	resp, err := c.Call(context.Background(), req)
	if err != nil || !resp.Replayed {
		t.Fatalf("the repeat under the same key: %+v, %v", resp, err)
	}
}

func TestErrors(t *testing.T) {
	type check struct {
		code    int
		errCode string   // the error code on stderr
		says    []string // what stderr must also say
	}
	cases := []struct {
		name  string
		setup func(t *testing.T, tb *toolbeltDouble) map[string]string
		args  []string
		want  check
	}{
		{"operation not granted", nil, []string{"call", "github.pr.merge"},
			check{ExitFailed, "forbidden", []string{"os guidance"}}},
		{"request ID reused with another body", func(t *testing.T, tb *toolbeltDouble) map[string]string {
			if r := run(t, tb, nil, "", "call", "test.echo", "--input", `{"text":"a"}`, "--request-id", "dup"); r.code != 0 {
				t.Fatal(r.err)
			}
			return nil
		}, []string{"call", "test.echo", "--input", `{"text":"b"}`, "--request-id", "dup"},
			check{ExitFailed, "request_conflict", []string{"new --request-id"}}},
		{"extension refusal", func(t *testing.T, tb *toolbeltDouble) map[string]string {
			tb.answer("test.echo", func(json.RawMessage) (int, any) {
				return 422, [2]string{"test_rate_limited", "the service is rate limited; try again in a minute"}
			})
			return nil
		}, []string{"call", "test.echo"},
			check{ExitFailed, "test_rate_limited", []string{"try again in a minute", "The operation refused"}}},
		{"invalid request", func(t *testing.T, tb *toolbeltDouble) map[string]string {
			tb.answer("test.echo", func(json.RawMessage) (int, any) {
				return 422, [2]string{"invalid_request", "text must be a string"}
			})
			return nil
		}, []string{"call", "test.echo", "--input", `{"text":1}`},
			check{ExitFailed, "invalid_request", []string{"text must be a string", "input schema"}}},
		{"authority released", func(t *testing.T, tb *toolbeltDouble) map[string]string {
			if r := run(t, tb, nil, "", "outcome", "succeeded"); r.code != 0 {
				t.Fatal(r.err)
			}
			return nil
		}, []string{"outcome", "succeeded"},
			check{ExitFailed, "authority_released", []string{"declaration landed", "exit now"}}},
		{"token revoked", func(t *testing.T, tb *toolbeltDouble) map[string]string {
			tb.mu.Lock()
			tb.token = "a-token-nobody-has"
			tb.mu.Unlock()
			return nil
		}, []string{"emit", "x.y"},
			check{ExitFailed, "unauthorized", []string{"retry once"}}},
		{"management socket", func(t *testing.T, tb *toolbeltDouble) map[string]string {
			tb.mu.Lock()
			tb.wrongSide = true
			tb.mu.Unlock()
			return nil
		}, []string{"guidance"},
			check{ExitFailed, "wrong_credential_class", []string{"toolbelt.sock"}}},
		{"socket gone", func(t *testing.T, tb *toolbeltDouble) map[string]string {
			tb.dirs.Close(tb.execution)
			// Without retrying: a restart's retry is osclient's test.
			return map[string]string{osclient.EnvDialRetry: "0"}
		}, []string{"emit", "x.y"},
			check{ExitFailed, "endpoint_unreachable", []string{"same --request-id"}}},
		{"token file gone", func(t *testing.T, tb *toolbeltDouble) map[string]string {
			return map[string]string{osclient.EnvTokenFile: filepath.Join(t.TempDir(), "missing")}
		}, []string{"emit", "x.y"},
			check{ExitFailed, "token_unavailable", []string{"missing", "attempt has ended"}}},
		{"token file empty", func(t *testing.T, tb *toolbeltDouble) map[string]string {
			p := filepath.Join(t.TempDir(), "empty")
			os.WriteFile(p, []byte("\n"), 0o600)
			return map[string]string{osclient.EnvTokenFile: p}
		}, []string{"emit", "x.y"},
			check{ExitFailed, "token_unavailable", []string{"does not hold a token"}}},
		{"outside an execution", func(t *testing.T, tb *toolbeltDouble) map[string]string {
			return map[string]string{osclient.EnvEndpoint: "", osclient.EnvTokenFile: ""}
		}, []string{"emit", "x.y"},
			check{ExitFailed, "environment_unset", []string{"OS_ENDPOINT", "OS_TOKEN_FILE"}}},
		{"not JSON", nil, []string{"call", "test.echo", "--input", "{nope"},
			check{ExitUsage, "", []string{"--input is not valid JSON"}}},
		{"not JSON, never echoed", nil, []string{"call", "test.echo", "--input", "Zs3cret"},
			check{ExitUsage, "", []string{"--input is not valid JSON", "syntax error at byte"}}},
		{"input not an object", nil, []string{"call", "test.echo", "--input", "[1]"},
			check{ExitUsage, "", []string{"JSON object"}}},
		{"bad operation name", nil, []string{"call", "Not An Op"},
			check{ExitUsage, "", []string{"not an operation name"}}},
		{"bad outcome", nil, []string{"outcome", "maybe"},
			check{ExitUsage, "", []string{"succeeded or failed"}}},
		{"bad timeout", nil, []string{"wait", "--timeout", "soon"},
			check{ExitUsage, "", []string{"positive duration"}}},
		{"missing argument", nil, []string{"emit"},
			check{ExitUsage, "", []string{"os emit needs one Event TYPE", "os emit --help"}}},
		{"extra argument", nil, []string{"wait", "now"},
			check{ExitUsage, "", []string{"os wait takes no arguments"}}},
		{"unknown command", nil, []string{"frobnicate"},
			check{ExitUsage, "", []string{"unknown command"}}},
		{"unknown flag", nil, []string{"emit", "a.b", "--bogus"},
			check{ExitUsage, "", []string{"unknown flag", "os emit --help"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tb := newToolbelt(t)
			var env map[string]string
			if tc.setup != nil {
				env = tc.setup(t, tb)
			}
			before := len(tb.requests())
			r := run(t, tb, env, "", tc.args...)
			if r.code != tc.want.code {
				t.Fatalf("exit %d, want %d; stderr: %s", r.code, tc.want.code, r.err)
			}
			if r.out != "" {
				t.Errorf("printed %q on stdout", r.out)
			}
			if tc.want.errCode != "" && !strings.Contains(r.err, "os: "+tc.want.errCode+":") {
				t.Errorf("stderr %q lacks the code %s", r.err, tc.want.errCode)
			}
			for _, want := range tc.want.says {
				if !strings.Contains(r.err, want) {
					t.Errorf("stderr %q lacks %q", r.err, want)
				}
			}
			if strings.Contains(r.err, "Zs3cret") || strings.Contains(r.err, "'Z'") {
				t.Errorf("stderr %q echoes the input", r.err)
			}
			if tc.want.code == ExitUsage && len(tb.requests()) != before {
				t.Errorf("a usage error reached the toolbelt")
			}
		})
	}
}

func TestGitCredentialInProcess(t *testing.T) {
	tb := newToolbelt(t)
	request := "protocol=https\nhost=github.com\npath=acme/widgets.git\nusername=x-access-token\ncapability[]=authtype\n\n"

	// Nothing granted serves git.credential: no output, exit 0, no call,
	// and standard error says why.
	r := run(t, tb, nil, request, "git-credential", "get")
	if r.code != ExitOK || r.out != "" || !strings.Contains(r.err, "serves git.credential") {
		t.Fatalf("with nothing serving: exit %d, %q, %s", r.code, r.out, r.err)
	}
	// A request without a host: nothing to answer, and it says so.
	if r := run(t, tb, nil, "protocol=https\n\n", "git-credential", "get"); r.code != ExitOK || r.out != "" || !strings.Contains(r.err, "no protocol and host") {
		t.Fatalf("without a host: exit %d, %q, %s", r.code, r.out, r.err)
	}
	if got := tb.last(); got.Path != "/v1/toolbelt/serving" || got.Query != "capability=git.credential" {
		t.Errorf("asked %s?%s", got.Path, got.Query)
	}

	tb.mu.Lock()
	tb.ops = append(tb.ops,
		osclient.Operation{Name: "test.git.credential", Summary: "A git credential.", Capabilities: []string{"git.credential"}},
		osclient.Operation{Name: "test.git.other", Summary: "Another.", Capabilities: []string{"git.credential"}})
	tb.mu.Unlock()
	tb.answer("test.git.credential", func(in json.RawMessage) (int, any) {
		return 200, map[string]string{"username": "x-access-token", "password": "ghs_installation"}
	})
	r = run(t, tb, nil, request, "git-credential", "get")
	if r.code != ExitOK {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	if r.out != "username=x-access-token\npassword=ghs_installation\n" {
		t.Errorf("printed %q", r.out)
	}
	wantRequest(t, tb.last(), tb, map[string]any{
		"operation": "test.git.credential",
		"input":     map[string]any{"protocol": "https", "host": "github.com", "path": "acme/widgets.git", "username": "x-access-token"},
	})

	// store and erase read the request and do nothing.
	before := len(tb.requests())
	for _, action := range []string{"store", "erase"} {
		r := run(t, tb, nil, request+"password=p\n", "git-credential", action)
		if r.code != ExitOK || r.out != "" || r.err != "" {
			t.Errorf("%s: exit %d, %q, %q", action, r.code, r.out, r.err)
		}
	}
	if len(tb.requests()) != before {
		t.Error("store or erase called the toolbelt")
	}

	// Outside an execution: nothing on stdout, exit 0, a note on stderr.
	r = run(t, nil, nil, request, "git-credential", "get")
	if r.code != ExitOK || r.out != "" || !strings.Contains(r.err, "OS_ENDPOINT") {
		t.Errorf("outside an execution: exit %d, %q, %q", r.code, r.out, r.err)
	}

	// A refusal is reported and exits 1; git then asks its next helper.
	tb.answer("test.git.credential", func(json.RawMessage) (int, any) {
		return 422, [2]string{"github_no_installation", "no installation covers acme/widgets"}
	})
	r = run(t, tb, nil, request, "git-credential", "get")
	if r.code != ExitFailed || r.out != "" || !strings.Contains(r.err, "github_no_installation") {
		t.Errorf("a refusal: exit %d, %q, %q", r.code, r.out, r.err)
	}
}

func TestReadCredentialRequest(t *testing.T) {
	got, err := readCredentialRequest(strings.NewReader("protocol=https\r\nhost=example.com\nwwwauth[]=Basic\nnonsense\nhost=other.example\n\npassword=after-the-blank-line\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"protocol": "https", "host": "other.example"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestSplitArguments(t *testing.T) {
	for _, tc := range []struct {
		in        string
		input     any
		requestID string
		bad       bool
	}{
		{``, map[string]any{}, "", false},
		{`null`, map[string]any{}, "", false},
		{`{"text":"hi"}`, map[string]any{"text": "hi"}, "", false},
		{`{"text":"hi","_request_id":"r-9"}`, map[string]any{"text": "hi"}, "r-9", false},
		{`{"_request_id":7}`, nil, "", true},
		{`[1]`, nil, "", true},
	} {
		input, id, err := splitArguments(json.RawMessage(tc.in), true)
		if tc.bad {
			if err == nil {
				t.Errorf("%s: accepted", tc.in)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if got := jsonOf(t, string(input)); !reflect.DeepEqual(got, tc.input) || id != tc.requestID {
			t.Errorf("%s: input %v, request ID %q", tc.in, got, id)
		}
	}
}

func TestSplitArgumentsUnreserved(t *testing.T) {
	input, id, err := splitArguments(json.RawMessage(`{"_request_id":7}`), false)
	if err != nil || id != "" || string(input) != `{"_request_id":7}` {
		t.Errorf("unreserved: %s, %q, %v", input, id, err)
	}
}

func TestToolSchema(t *testing.T) {
	s, reserved, err := toolSchema(json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"additionalProperties":false}`))
	if err != nil {
		t.Fatal(err)
	}
	props := s["properties"].(map[string]any)
	if props["n"] == nil || props[RequestIDArgument] == nil || s["additionalProperties"] != false || !reserved {
		t.Errorf("schema = %v, reserved %v", s, reserved)
	}
	if s, reserved, err := toolSchema(nil); err != nil || s["type"] != "object" || !reserved {
		t.Errorf("an absent schema: %v, %v, %v", s, reserved, err)
	}
	if _, _, err := toolSchema(json.RawMessage(`{"type":"string"}`)); err == nil {
		t.Error("a non-object schema was accepted")
	}
	// An operation whose own input has the reserved name keeps it as input.
	s, reserved, err = toolSchema(json.RawMessage(`{"type":"object","properties":{"_request_id":{"type":"integer"}}}`))
	if err != nil || reserved || s["properties"].(map[string]any)[RequestIDArgument].(map[string]any)["type"] != "integer" {
		t.Errorf("an operation that owns the name: %v, reserved %v, %v", s, reserved, err)
	}
}
