package oscli

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// rawMCP is os mcp driven line by line, as a client with bugs would.
type rawMCP struct {
	t   *testing.T
	in  io.WriteCloser
	out *bufio.Reader
}

func startRawMCP(t *testing.T, tb *toolbeltDouble) *rawMCP {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a failure guard only
	cmd := exec.CommandContext(ctx, osBinary, "mcp")
	cmd.Env = childEnv(t, tb)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("os mcp: %v (stderr: %s)", err, stderr.String())
		}
		cancel()
	})
	return &rawMCP{t: t, in: in, out: bufio.NewReader(out)}
}

// exchange writes line and decodes the one reply line.
func (r *rawMCP) exchange(line string) map[string]any {
	r.t.Helper()
	if _, err := io.WriteString(r.in, line+"\n"); err != nil {
		r.t.Fatal(err)
	}
	reply, err := r.out.ReadString('\n')
	if err != nil {
		r.t.Fatalf("no reply to %s: %v", line, err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(reply), &m); err != nil {
		r.t.Fatalf("reply %q: %v", reply, err)
	}
	return m
}

func errorCode(m map[string]any) float64 {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(float64)
	return c
}

func TestMCPAnswersBrokenInputAndGoesOn(t *testing.T) {
	tb := newToolbelt(t)
	r := startRawMCP(t, tb)

	// A call before initialize is an invalid request, with its id.
	early := r.exchange(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if errorCode(early) != -32600 || early["id"] != float64(1) {
		t.Errorf("a call before initialize got %v", early)
	}
	// A line that is not JSON is a parse error with id null, and the
	// server goes on.
	for _, bad := range []string{`not json`, `{"jsonrpc":"2.0","id":2,`, `[1,2]`} {
		got := r.exchange(bad)
		if id, ok := got["id"]; errorCode(got) != -32700 || !ok || id != nil {
			t.Errorf("%q got %v", bad, got)
		}
	}
	initResp := r.exchange(`{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if _, ok := initResp["result"]; !ok {
		t.Fatalf("initialize after broken lines got %v", initResp)
	}
	if _, err := io.WriteString(r.in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
		t.Fatal(err)
	}

	// A request-ID conflict tells the model about the argument, not the
	// CLI flag.
	tb.answer("test.echo", func(json.RawMessage) (int, any) {
		return 409, [2]string{"request_conflict", "the request ID was used with another body"}
	})
	res := r.exchange(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"test.echo","arguments":{"text":"x","_request_id":"r-1"}}}`)
	result, _ := res["result"].(map[string]any)
	text, _ := json.Marshal(result["content"])
	if result["isError"] != true || !strings.Contains(string(text), RequestIDArgument) || strings.Contains(string(text), "--request-id") {
		t.Errorf("a conflict came back as %v", res)
	}
}
