package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/open-conduit/open-conduit/internal/executor"
)

func parse(t *testing.T, doc string) (Config, error) {
	t.Helper()
	w := &executor.ConfigWalker{Executor: "test", Dec: jsontext.NewDecoder(bytes.NewReader([]byte(doc)), jsontext.AllowDuplicateNames(true))}
	cfg := Parse(w, "/sandbox", true)
	return cfg, w.Err()
}

func TestParse(t *testing.T) {
	for doc, want := range map[string]bool{`{"enabled": true}`: true, `{"enabled": false}`: false} {
		cfg, err := parse(t, doc)
		if err != nil || cfg.Enabled != want {
			t.Errorf("%s: %+v, %v", doc, cfg, err)
		}
	}
	cfg, err := parse(t, `{"enabled": true, "read_only": ["/opt/agents", "/srv/tools/bin"]}`)
	if err != nil || !cfg.Enabled || strings.Join(cfg.ReadOnly, ",") != "/opt/agents,/srv/tools/bin" {
		t.Errorf("read_only: %+v, %v", cfg, err)
	}
	many := `{"enabled": true, "read_only": [`
	for i := 0; i <= MaxReadOnly; i++ {
		if i > 0 {
			many += ","
		}
		many += `"/p` + strconv.Itoa(i) + `"`
	}
	many += `]}`
	for doc, code := range map[string]string{
		`true`:                                    "wrong_type",
		`null`:                                    "null_value",
		`{}`:                                      "missing_field",
		`{"enabled": "yes"}`:                      "wrong_type",
		`{"enabled": null}`:                       "null_value",
		`{"enabled": true, "enabled": false}`:     "duplicate_key",
		`{"enabled": true, "mounts": []}`:         "unknown_field",
		`{"enabled": true, "read_only": "/opt"}`:  "wrong_type",
		`{"enabled": true, "read_only": [1]}`:     "wrong_type",
		`{"enabled": true, "read_only": ["opt"]}`: "invalid_value",
		`{"enabled": true, "read_only": ["/opt/../etc"]}`: "invalid_value",
		`{"enabled": true, "read_only": ["/opt/"]}`:       "invalid_value",
		`{"enabled": true, "read_only": ["/"]}`:           "invalid_value",
		`{"enabled": true, "read_only": ["/a", "/a"]}`:    "invalid_value",
		many: "too_many",
	} {
		_, err := parse(t, doc)
		var ce *executor.ConfigError
		if !errors.As(err, &ce) || len(ce.Problems) != 1 || ce.Problems[0].Code != code || !strings.HasPrefix(ce.Problems[0].Pointer, "/sandbox") {
			t.Errorf("%s: %v, want one %s", doc, err, code)
		}
	}
}

func TestWrapMountsTheRunDirectoryAndTheFallbackSocket(t *testing.T) {
	run := "/state/runs/k"
	spec := Spec{Program: "/usr/bin/bwrap", OS: "/state/bin/os", TokenFile: run + "/token/token", Endpoint: "/tmp/open-conduit-0/k/toolbelt.sock",
		Writable: []string{"/state/executions/e/work"}, Dir: "/state/executions/e/work", Argv: []string{"sh", "-c", "true"}}
	argv, in, err := Wrap(spec)
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(argv, " ")
	for _, want := range []string{"--ro-bind " + run + " " + RunDir, "--ro-bind /tmp/open-conduit-0/k " + SocketDir, "--ro-bind /state/bin " + BinDir,
		"--bind /state/executions/e/work /state/executions/e/work", "-- " + InitProgram + " sandbox-init --bridge " + SocketDir + "/egress.sock -- sh -c true"} {
		if !strings.Contains(joined, want) {
			t.Errorf("argv lacks %q: %s", want, joined)
		}
	}
	spec.ReadOnly = []string{"/opt/agents"}
	spec.Endpoint = run + "/toolbelt.sock"
	argv, _, err = Wrap(spec)
	if err != nil {
		t.Fatal(err)
	}
	if j := strings.Join(argv, " "); !strings.Contains(j, "--ro-bind /opt/agents /opt/agents") || !strings.Contains(j, "--bridge "+EgressSocket+" --") {
		t.Errorf("argv with read_only and the socket in the run directory: %s", j)
	}
	if strings.Contains(joined, " /state ") || strings.Contains(joined, "/etc/shadow") {
		t.Errorf("argv mounts too much: %s", joined)
	}
	if in.Endpoint != SocketDir+"/toolbelt.sock" || in.TokenFile != TokenFile || in.BinDir != BinDir {
		t.Errorf("inside = %+v", in)
	}
	spec.TokenFile = run + "/token"
	if _, _, err := Wrap(spec); err == nil {
		t.Error("a token file outside its token/ directory was accepted")
	}
}

func TestCheckNamesThePackage(t *testing.T) {
	_, err := (&Runtime{Program: filepath.Join(t.TempDir(), "bwrap")}).Check()
	var ue *executor.UnavailableError
	if !errors.As(err, &ue) || ue.Reason != "sandbox_unavailable" || !strings.Contains(ue.Detail, "bubblewrap") {
		t.Fatalf("Check = %v", err)
	}
}

// TestBridgeForwardsBothWays: each connection to the bridge reaches the
// Unix socket, byte for byte both ways, half-closes included.
func TestBridgeForwardsBothWays(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "egress.sock")
	u, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	go func() {
		for {
			c, err := u.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b, _ := io.ReadAll(c) // until the client's half-close
				c.Write(append([]byte("got:"), b...))
			}()
		}
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go Bridge(ln, sock)
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		payload := strings.Repeat("x", 100000) + "\x00end"
		go func() {
			io.WriteString(c, payload)
			c.(*net.TCPConn).CloseWrite()
		}()
		got, err := io.ReadAll(bufio.NewReader(c))
		c.Close()
		if err != nil || string(got) != "got:"+payload {
			t.Fatalf("connection %d: %d bytes, %v", i, len(got), err)
		}
	}
}

// TestInitExitsWithTheCommandsStatus runs real commands under Init.
func TestInitExitsWithTheCommandsStatus(t *testing.T) {
	for argv, want := range map[string]int{"true": 0, "exit 3": 3, "kill -TERM $$": 128 + 15} {
		code, err := Init("", []string{"sh", "-c", argv})
		if err != nil || code != want {
			t.Errorf("%s: %d, %v; want %d", argv, code, err, want)
		}
	}
	if code, err := Init("", []string{filepath.Join(t.TempDir(), "none")}); code != 127 || err == nil {
		t.Errorf("a missing program: %d, %v", code, err)
	}
}
