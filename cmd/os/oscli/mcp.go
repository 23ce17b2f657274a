package oscli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/open-conduit/open-conduit/internal/buildinfo"
	"github.com/open-conduit/open-conduit/osclient"
	"github.com/spf13/cobra"
)

// RequestIDArgument is the reserved tool argument that carries a request ID
// through os mcp. It is taken out of the arguments before the rest become
// the operation's input.
const RequestIDArgument = "_request_id"

func newMCPCmd(s Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "mcp",
		Short: "Serve this execution's granted operations as MCP tools on stdio",
		Long: `Run a Model Context Protocol server on standard input and output. Its tools
are the operations this execution's token grants (name, input schema, and
a description of the operation's summary and guidance); its instructions
are the toolbelt's guidance followed by each granted operation's own. A
tool call is a
toolbelt call with a fresh request ID, unless the arguments carry one as
"` + RequestIDArgument + `" (reuse it to retry a call safely); a refusal is a tool error
with its code and message.`,
		Args: args(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := client(s)
			if err != nil {
				return err
			}
			defer c.Close()
			srv, err := newMCPServer(cmd.Context(), c, s.Err)
			if err != nil {
				return err
			}
			err = srv.Run(cmd.Context(), mcpTransport(s))
			if err == nil || errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
				return nil
			}
			return fmt.Errorf("mcp: %w", err)
		},
	}
}

// mcpTransport is newline-delimited JSON-RPC on the command's streams
// (see lineTransport).
func mcpTransport(s Streams) mcp.Transport {
	return lineTransport{in: s.In, out: s.Out}
}

// newMCPServer reads the guidance once and builds a server whose tools are
// the granted operations. A token's grant is pinned for its attempt, so the
// list does not change while the server runs.
func newMCPServer(ctx context.Context, c *osclient.Client, warn io.Writer) (*mcp.Server, error) {
	g, err := c.Guidance(ctx)
	if err != nil {
		return nil, err
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "open-conduit-os", Version: buildinfo.Version()}, &mcp.ServerOptions{
		Instructions: instructionsOf(*g),
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	})
	for _, op := range g.Operations {
		schema, reserved, err := toolSchema(op.InputSchema)
		if err != nil {
			fmt.Fprintf(warn, "os mcp: skipping %s: %v\n", op.Name, err)
			continue
		}
		srv.AddTool(&mcp.Tool{Name: op.Name, Description: descriptionOf(op), InputSchema: schema}, toolHandler(c, op.Name, reserved))
	}
	return srv, nil
}

// instructionsOf is the server's instructions: the toolbelt's overall
// guidance, then each granted operation's own guidance under its name, so
// an agent reads what its grant allows and how, and nothing else.
func instructionsOf(g osclient.Guidance) string {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(g.Guidance))
	if b.Len() == 0 {
		b.WriteString("The tools are the Open Conduit toolbelt operations this execution may call.")
	}
	for _, op := range g.Operations {
		if guidance := strings.TrimSpace(op.Guidance); guidance != "" {
			fmt.Fprintf(&b, "\n\n## %s\n\n%s", op.Name, guidance)
		}
	}
	return b.String()
}

// descriptionOf is a tool's description: the operation's summary, then its
// guidance.
func descriptionOf(op osclient.Operation) string {
	parts := []string{}
	for _, p := range []string{strings.TrimSpace(op.Summary), strings.TrimSpace(op.Guidance)} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, "\n\n")
}

// toolSchema turns an operation's input schema into a tool's: an object
// schema (an absent schema takes any object) that also offers the reserved
// request ID argument, unless the operation's own input has a member of
// that name (reserved is false then, and the argument stays input).
func toolSchema(raw json.RawMessage) (schema map[string]any, reserved bool, err error) {
	schema = map[string]any{}
	if s := strings.TrimSpace(string(raw)); s != "" && s != "null" {
		if err := json.Unmarshal(raw, &schema); err != nil {
			return nil, false, fmt.Errorf("its input schema is not a JSON object: %v", err)
		}
	}
	switch t := schema["type"]; t {
	case nil:
		schema["type"] = "object"
	case "object":
	default:
		return nil, false, fmt.Errorf("its input schema has type %v, but an operation's input is an object", t)
	}
	props, ok := schema["properties"].(map[string]any)
	if !ok {
		if schema["properties"] != nil {
			return nil, false, errors.New("its input schema's properties is not an object")
		}
		props = map[string]any{}
		schema["properties"] = props
	}
	if _, taken := props[RequestIDArgument]; taken {
		return schema, false, nil
	}
	props[RequestIDArgument] = map[string]any{
		"type":        "string",
		"description": "Optional. A request ID for this call: repeating a call with the same ID and arguments returns the first call's result instead of acting again. Omit it for a new call.",
	}
	return schema, true, nil
}

// toolHandler makes a tool call a toolbelt call of op. With reserved, the
// request ID argument is taken out of the arguments.
func toolHandler(c *osclient.Client, op string, reserved bool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		input, requestID, err := splitArguments(req.Params.Arguments, reserved)
		if err != nil {
			return toolError(&osclient.Error{Code: osclient.CodeInvalidRequest, Message: err.Error()}), nil
		}
		if requestID == "" {
			requestID = freshRequestID()
		}
		resp, err := c.Call(ctx, osclient.CallRequest{Operation: op, Input: input, RequestID: requestID})
		if err != nil {
			var oe *osclient.Error
			if errors.As(err, &oe) {
				return toolError(oe), nil
			}
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(resp.Result)}}}, nil
	}
}

// splitArguments returns a tool call's arguments as the operation's input
// ({} when absent) and, with reserved, takes the request ID out of them.
func splitArguments(raw json.RawMessage, reserved bool) (json.RawMessage, string, error) {
	if s := strings.TrimSpace(string(raw)); s == "" || s == "null" {
		return json.RawMessage(`{}`), "", nil
	}
	if !reserved {
		return raw, "", nil
	}
	var args map[string]json.RawMessage
	if err := json.Unmarshal(raw, &args); err != nil {
		return nil, "", errors.New("the arguments must be a JSON object")
	}
	var requestID string
	if v, ok := args[RequestIDArgument]; ok {
		if err := json.Unmarshal(v, &requestID); err != nil {
			return nil, "", fmt.Errorf("%s must be a string", RequestIDArgument)
		}
		delete(args, RequestIDArgument)
		raw, _ = json.Marshal(args) // raw values of a decoded object always marshal
	}
	return raw, requestID, nil
}

// toolError reports a refusal to the model as a tool error, so it can read
// the code and message and change course.
func toolError(e *osclient.Error) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: describeForMCP(e)}}}
}

// describeForMCP is describe for a model: the next steps that name the
// os CLI's --request-id flag name the tool argument that carries it.
func describeForMCP(e *osclient.Error) string {
	switch e.Code {
	case osclient.CodeRequestConflict:
		return e.Error() + "\nThis " + RequestIDArgument + " was already used with different arguments. Repeat the original arguments with it to get its result again, or call without " + RequestIDArgument + " (or with a new one) for a new request."
	case osclient.CodeUnauthorized:
		return e.Error() + "\nThe token in OS_TOKEN_FILE was not accepted. The host rotates it on every resume and revokes it when the attempt ends; if this run is still live, retry once with the same " + RequestIDArgument + "."
	}
	return describe(e)
}

// freshRequestID names one tool call: mcp_ and 32 random hex digits.
func freshRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "mcp_" + hex.EncodeToString(b[:])
}
