package mcppkg

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/packages"
)

// The test binary is also the small MCP server some tests run: started
// with testServerEnv set, TestMain serves instead of testing.
const (
	testServerEnv = "MCPPKG_TEST_SERVER" // the mode: kit, stubborn, exit
	testDirEnv    = "MCPPKG_TEST_DIR"    // where it counts its starts
	testShrinkEnv = "MCPPKG_TEST_SHRINK" // "1": from its second start on, it drops write_note
	testStderrEnv = "MCPPKG_TEST_STDERR" // "1": it says on stderr that it started
	testHostEnv   = "MCPPKG_TEST_HOST"   // a package directory: be the daemon that runs it
)

// host stands for the daemon: it starts the kit package in dir with a
// server that outlives the end of its input, prints the server's pids and
// waits to be killed.
func host(dir string) int {
	in, err := NewRuntime(Options{}).Start(context.Background(), packages.Installed{Dir: dir, Manifest: packages.Manifest{
		Name: "kit", Version: "v1", Kind: packages.KindMCP,
		Run: packages.Run{Command: []string{"./server"}, Env: map[string]string{testServerEnv: "stubborn"}},
	}})
	if err != nil {
		fmt.Println("start:", err)
		return 1
	}
	out, err := in.Registration().Operations[slices.IndexFunc(in.Registration().Operations, func(op extension.Operation) bool { return op.Name == "kit.pid" })].
		Handler(context.Background(), extension.Authority{}, json.RawMessage(`{}`))
	if err != nil {
		fmt.Println("pid:", err)
		return 1
	}
	fmt.Println(string(out))
	select {}
}

func TestMain(m *testing.M) {
	if dir := os.Getenv(testHostEnv); dir != "" {
		os.Exit(host(dir))
	}
	if mode := os.Getenv(testServerEnv); mode != "" {
		os.Exit(serve(mode))
	}
	os.Exit(m.Run())
}

// serve runs the test server over stdio.
func serve(mode string) int {
	if mode == "exit" {
		return 1
	}
	starts := 1
	if dir := os.Getenv(testDirEnv); dir != "" {
		b, _ := os.ReadFile(filepath.Join(dir, "starts"))
		starts, _ = strconv.Atoi(string(b))
		starts++
		_ = os.WriteFile(filepath.Join(dir, "starts"), []byte(strconv.Itoa(starts)), 0o600)
	}
	if os.Getenv(testStderrEnv) == "1" {
		fmt.Fprintf(os.Stderr, "mcppkg-test start %d\n", starts)
	}
	var child *exec.Cmd
	if mode == "stubborn" {
		// It ignores SIGTERM and the end of its input, and leaves a child
		// in its group.
		signal.Ignore(syscall.SIGTERM)
		child = exec.Command("sleep", "600")
		if err := child.Start(); err != nil {
			return 2
		}
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcppkg-test", Version: "1"}, &mcp.ServerOptions{PageSize: 2})
	obj := func(props string) json.RawMessage {
		return json.RawMessage(`{"type":"object","properties":{` + props + `}}`)
	}
	structured := func(v any) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "structured"}}, StructuredContent: v}
	}
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true}
	srv.AddTool(&mcp.Tool{Name: "echo", Description: "Echo the text back. It also says which request ID it saw.\n\nUse it to test.", InputSchema: obj(`"text":{"type":"string"}`), Annotations: ro},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct{ Text string }
			_ = json.Unmarshal(req.Params.Arguments, &in)
			return structured(map[string]any{"said": in.Text, "request_id": req.Params.Meta[RequestIDMeta]}), nil
		})
	srv.AddTool(&mcp.Tool{Name: "pid", Description: "Say the server's pid", InputSchema: obj(""), Annotations: ro},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			out := map[string]any{"pid": os.Getpid()}
			if child != nil {
				out["child"] = child.Process.Pid
			}
			return structured(out), nil
		})
	if !(os.Getenv(testShrinkEnv) == "1" && starts >= 2) {
		srv.AddTool(&mcp.Tool{Name: "Write.Note", Description: "Write a note.", InputSchema: obj(`"note":{"type":"string"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "noted"}}}, nil
			})
	} else {
		srv.AddTool(&mcp.Tool{Name: "extra", Description: "A tool that came after a restart.", InputSchema: obj("")},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
	}
	srv.AddTool(&mcp.Tool{Name: "fail", Description: "Fail.", InputSchema: obj("")},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no such\nthing"}}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "list", Description: "Answer a list.", InputSchema: obj("")},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return structured([]int{1, 2}), nil
		})
	srv.AddTool(&mcp.Tool{Name: "crash", Description: "Exit in the middle of the call.", InputSchema: obj("")},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			os.Exit(3)
			return nil, nil
		})
	srv.AddTool(&mcp.Tool{Name: "hide", Description: "Remove the tool list from the list.", InputSchema: obj("")},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			srv.RemoveTools("list")
			return &mcp.CallToolResult{}, nil
		})
	for _, name := range []string{"Dup", "dup", "9lives"} {
		srv.AddTool(&mcp.Tool{Name: name, Description: "Never registered.", InputSchema: obj("")},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
	}
	err := srv.Run(context.Background(), &mcp.StdioTransport{})
	if mode == "stubborn" {
		select {}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "SECRET-STDERR", err)
		return 1
	}
	return 0
}
