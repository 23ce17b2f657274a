package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// needCurl skips without curl, and fails under CI=true.
func needCurl(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("curl")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("curl is required under CI: install it (apt-get install curl)")
		}
		t.Skip("curl is not installed (apt-get install curl); skipping the egress proxy's end-to-end test")
	}
	return p
}

// bridgeTo listens on a loopback port and splices every connection to the
// Unix socket whose path the file at pathFile names (read at each
// connection): what the sandbox's bridge does inside the namespace.
func bridgeTo(t *testing.T, pathFile string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				path, err := os.ReadFile(pathFile)
				if err != nil {
					return
				}
				u, err := net.Dial("unix", strings.TrimSpace(string(path)))
				if err != nil {
					return
				}
				defer u.Close()
				done := make(chan struct{})
				go func() { io.Copy(u, c); u.(*net.UnixConn).CloseWrite(); close(done) }()
				io.Copy(c, u)
				c.(*net.TCPConn).CloseWrite()
				<-done
			}()
		}
	}()
	return ln.Addr().String()
}

// The egress proxy end to end: a shell execution reaches an allowed
// loopback server through its run directory's egress.sock with curl, is
// refused another port with a message naming where to allow it; after a
// daemon restart the adopted attempt's proxy is served again; after an
// apply that removes the host, the allowed one is refused too; `executions
// egress` shows every connection and the metrics count them.
func TestEgressProxy(t *testing.T) {
	curl := needCurl(t)
	allowed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "hello from the allowed host") }))
	defer allowed.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "nobody should see this") }))
	defer other.Close()
	allowedAddr, otherAddr := allowed.Listener.Addr().String(), other.Listener.Addr().String()

	e := newEnv(t)
	if err := os.MkdirAll(e.state, 0o700); err != nil {
		t.Fatal(err)
	}
	fifo, out := filepath.Join(e.root, "fifo"), filepath.Join(e.root, "out")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// The job finds egress.sock beside its toolbelt socket and says where
	// it is; the test bridges a loopback port to it, as the sandbox's
	// bridge does inside a network namespace (curl speaks to an HTTP
	// proxy over TCP only), and curl's -p tunnels even plain http
	// through CONNECT.
	sockFile := filepath.Join(e.root, "egress-path")
	bridge := bridgeTo(t, sockFile)
	script := `echo "$(dirname "$OS_ENDPOINT")/egress.sock" > "$SOCKFILE"
fetch() { "$CURL" -sS -p --max-time 20 -x "http://$BRIDGE" "http://$1/" 2>&1; echo " exit=$?"; }
{ echo "allowed: $(fetch "$ALLOWED")"; echo "other: $(fetch "$OTHER")"; } >> "$OUT"
read x < "$FIFO"
echo "after: $(fetch "$ALLOWED")" >> "$OUT"
read code < "$FIFO"; exit "$code"`
	writeConfig := func(egress string) string {
		return `{
  "version": 1,
  "scopes": {
    "t": {
      "authorization": {"operations": ["declare_outcome"]},
      "bindings": {"job": {
        "executor": "shell",
        "config": {"command": ["sh", "-c", ` + strconv.Quote(script) + `], "env": {"FIFO": ` + strconv.Quote(fifo) + `, "OUT": ` + strconv.Quote(out) +
			`, "CURL": ` + strconv.Quote(curl) + `, "SOCKFILE": ` + strconv.Quote(sockFile) + `, "BRIDGE": ` + strconv.Quote(bridge) + `, "ALLOWED": ` + strconv.Quote(allowedAddr) + `, "OTHER": ` + strconv.Quote(otherAddr) + `}},
        "operations": ["declare_outcome"],
        "egress": ` + egress + `
      }}
    }
  }
}`
	}
	if err := os.WriteFile(filepath.Join(e.state, "config.json"), []byte(writeConfig(`["`+allowedAddr+`"]`)), 0o600); err != nil {
		t.Fatal(err)
	}
	d := e.start()
	w := e.createWork("t")
	lines := func() string { b, _ := os.ReadFile(out); return string(b) }
	until(t, "the job's first two connections", func() bool { return strings.Count(lines(), "exit=") >= 2 })
	got := lines()
	if !strings.Contains(got, "allowed: hello from the allowed host exit=0") {
		t.Errorf("the allowed connection: %q", got)
	}
	if !strings.Contains(got, "other: ") || strings.Contains(got, "nobody should see this") || strings.Contains(got, "other: exit=0") {
		t.Errorf("the connection to another port was not refused: %q", got)
	}
	if !strings.Contains(got, "403") {
		t.Errorf("curl did not report the 403: %q", got)
	}
	exes := e.executions(w.ID)
	if len(exes) != 1 {
		t.Fatalf("executions %+v", exes)
	}
	exe := exes[0].ID
	if fi, err := os.Lstat(filepath.Join(e.state, "runs", runKey(exe), "egress.sock")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("egress.sock in the run directory: %v %v", fi, err)
	}

	// The refusal's message, seen by a client of our own: the host and
	// where to allow it, nothing configured.
	c, err := net.Dial("unix", filepath.Join(e.state, "runs", runKey(exe), "egress.sock"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", otherAddr, otherAddr)
	buf := make([]byte, 4096)
	n, _ := c.Read(buf)
	c.Close()
	if msg := string(buf[:n]); !strings.Contains(msg, "403") || !strings.Contains(msg, otherAddr) || !strings.Contains(msg, "/scopes/t/bindings/job/egress") || strings.Contains(msg, allowedAddr) {
		t.Errorf("the refusal = %q", msg)
	}

	// A daemon restart adopts the attempt and serves its proxy again.
	if code := d.stop(); code != 0 {
		t.Fatalf("the daemon stopped with %d", code)
	}
	e.start()
	c, err = net.Dial("unix", filepath.Join(e.state, "runs", runKey(exe), "egress.sock"))
	if err != nil {
		t.Fatalf("the egress socket after a restart: %v", err)
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", allowedAddr, allowedAddr)
	through, _ := io.ReadAll(c)
	c.Close()
	if !strings.HasPrefix(string(through), "HTTP/1.1 200 Connection Established") || !strings.Contains(string(through), "hello from the allowed host") {
		t.Errorf("a tunnel through the adopted attempt's proxy gave %q", through)
	}

	// An apply that removes the host refuses the next connection.
	cfg := writeConfig(`[]`)
	var applied struct {
		Generation int64 `json:"generation"`
	}
	e.must("POST", "/v1/config/apply", map[string]any{"config": json.RawMessage(cfg), "expected_generation": 1}, key(), &applied)
	if applied.Generation != 2 {
		t.Fatalf("apply: generation %d, want 2", applied.Generation)
	}
	release(t, fifo, 0)
	until(t, "the job's connection after the apply", func() bool { return strings.Count(lines(), "exit=") >= 3 })
	if after := lines(); strings.Contains(after, "after: hello") || strings.Contains(after, "after: exit=0") {
		t.Errorf("after the apply the host was still reached: %q", after)
	}
	release(t, fifo, 0)
	e.waitWork(w.ID, "terminal", func(w work) bool { return terminal(w.State) })

	// The operator sees every connection.
	code, table, stderr := e.cli("executions", "egress", exe)
	if code != 0 {
		t.Fatalf("executions egress: exit %d %s", code, stderr)
	}
	rows := strings.Split(strings.TrimSpace(table), "\n")
	if len(rows) != 6 || !strings.HasPrefix(rows[0], "STARTED") {
		t.Fatalf("executions egress printed:\n%s", table)
	}
	want := []struct{ target, result, reason string }{
		{allowedAddr, "allowed", "-"}, {otherAddr, "refused", "not_allowed"}, {otherAddr, "refused", "not_allowed"},
		{allowedAddr, "allowed", "-"}, {allowedAddr, "refused", "not_allowed"},
	}
	for i, wr := range want {
		f := strings.Fields(rows[i+1])
		if len(f) != 7 || f[1] != wr.target || f[2] != wr.result || f[3] != wr.reason {
			t.Errorf("row %d = %q, want %s %s %s", i+1, rows[i+1], wr.target, wr.result, wr.reason)
		}
	}
	if f := strings.Fields(rows[1]); len(f) == 7 && (f[4] == "0" || f[5] == "0" || f[6] == "open") {
		t.Errorf("the allowed connection's bytes or end were not recorded: %q", rows[1])
	}
	var page struct {
		Items []struct {
			Allowed   bool  `json:"allowed"`
			BytesDown int64 `json:"bytes_down"`
		} `json:"items"`
	}
	e.cliJSON(&page, "executions", "egress", exe)
	if len(page.Items) != 5 || !page.Items[0].Allowed || page.Items[0].BytesDown == 0 {
		t.Errorf("executions egress --json = %+v", page)
	}
	// And the daemon (since its restart) counted them: the tunnel after
	// the restart allowed, the one after the apply refused.
	metrics := string(e.must("GET", "/metrics", nil, nil, nil).Body)
	if !strings.Contains(metrics, `open_conduit_egress_connections_total{result="allowed"} 1`+"\n") ||
		!strings.Contains(metrics, `open_conduit_egress_connections_total{result="refused"} 1`+"\n") {
		t.Errorf("the egress counters are not in the metrics:\n%s", metrics)
	}
	if code, _, stderr := e.cli("executions", "egress", "exe_nobody"); code != 1 || !strings.Contains(stderr, "not_found") && !strings.Contains(stderr, "no execution") {
		t.Errorf("executions egress of an unknown execution: exit %d %q", code, stderr)
	}
}
