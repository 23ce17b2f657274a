package oscli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxMCPLine bounds one JSON-RPC message on os mcp's input. A longer line
// is answered with a parse error and skipped.
const maxMCPLine = 8 << 20

// lineTransport is os mcp's stdio transport: newline-delimited JSON-RPC,
// like the SDK's, except that a line that is not a JSON-RPC message is
// answered with a parse error (-32700) and skipped instead of ending the
// session, and a call made before the client's initialize is answered with
// invalid request (-32600) rather than the SDK's code 0.
type lineTransport struct {
	in  io.Reader
	out io.Writer
}

func (t lineTransport) Connect(context.Context) (mcp.Connection, error) {
	c := &lineConn{out: t.out, lines: make(chan []byte), done: make(chan struct{}), early: map[any]bool{}}
	go c.readLines(t.in)
	return c, nil
}

type lineConn struct {
	out   io.Writer
	lines chan []byte // one message each; closed at the end of input
	rerr  error       // why input ended; read after lines is closed

	done      chan struct{}
	closeOnce sync.Once

	wmu sync.Mutex // serialises writes

	mu          sync.Mutex
	initialized bool         // an initialize request has been read
	early       map[any]bool // ids of calls read before initialize
}

var _ mcp.Connection = (*lineConn)(nil)

// readLines feeds lines into c.lines until input ends or c is closed. An
// overlong line is replaced by nil, which Read answers as a parse error.
func (c *lineConn) readLines(in io.Reader) {
	defer close(c.lines)
	r := bufio.NewReaderSize(in, 64<<10)
	for {
		line, err := readLine(r)
		if len(bytes.TrimSpace(line)) > 0 || errors.Is(err, errLineTooLong) {
			if errors.Is(err, errLineTooLong) {
				line = nil
			}
			select {
			case c.lines <- line:
			case <-c.done:
				return
			}
		}
		if err != nil && !errors.Is(err, errLineTooLong) {
			c.rerr = err
			return
		}
	}
}

var errLineTooLong = errors.New("line too long")

// readLine reads one line without its newline, at most maxMCPLine bytes;
// the rest of a longer line is discarded and errLineTooLong returned.
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > maxMCPLine {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = r.ReadSlice('\n')
			}
			if err != nil {
				return nil, err
			}
			return nil, errLineTooLong
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return bytes.TrimSuffix(line, []byte("\n")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return line, err
		}
	}
}

// Read returns the next message; a line that does not decode is answered
// with a parse error and skipped.
func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		var line []byte
		var ok bool
		select {
		case line, ok = <-c.lines:
		case <-c.done:
			return nil, io.EOF
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if !ok {
			if c.rerr == nil || errors.Is(c.rerr, io.EOF) {
				return nil, io.EOF
			}
			return nil, c.rerr
		}
		msg, err := jsonrpc.DecodeMessage(line)
		if err != nil {
			text := "parse error: the line is not a JSON-RPC 2.0 message; it was skipped"
			if line == nil {
				text = "parse error: the line is longer than 8 MiB; it was skipped"
			}
			if werr := c.writeParseError(text); werr != nil {
				return nil, werr
			}
			continue
		}
		if req, ok := msg.(*jsonrpc.Request); ok {
			c.mu.Lock()
			switch {
			case req.Method == "initialize":
				c.initialized = true
			case !c.initialized && req.IsCall():
				c.early[req.ID.Raw()] = true
			}
			c.mu.Unlock()
		}
		return msg, nil
	}
}

// Write writes msg as one line. An error the SDK gives a call made before
// initialize (code 0, which JSON-RPC does not define) becomes invalid
// request.
func (c *lineConn) Write(_ context.Context, msg jsonrpc.Message) error {
	if resp, ok := msg.(*jsonrpc.Response); ok && resp.Error != nil && resp.ID.IsValid() {
		c.mu.Lock()
		early := c.early[resp.ID.Raw()]
		delete(c.early, resp.ID.Raw())
		c.mu.Unlock()
		var we *jsonrpc.Error
		if early && (!errors.As(resp.Error, &we) || we.Code == 0) {
			msg = &jsonrpc.Response{ID: resp.ID, Error: &jsonrpc.Error{
				Code:    jsonrpc.CodeInvalidRequest,
				Message: "invalid request: the session is not initialized; send initialize first (" + resp.Error.Error() + ")",
			}}
		}
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	return c.writeLine(data)
}

// writeParseError answers a line that could not be read: JSON-RPC wants
// its id null, which the SDK's encoder leaves out.
func (c *lineConn) writeParseError(text string) error {
	data, err := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"id":      nil,
		"error":   map[string]any{"code": jsonrpc.CodeParseError, "message": text},
	})
	if err != nil {
		return err
	}
	return c.writeLine(data)
}

func (c *lineConn) writeLine(data []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.out.Write(append(data, '\n'))
	return err
}

func (c *lineConn) Close() error {
	c.closeOnce.Do(func() { close(c.done) })
	return nil
}

func (c *lineConn) SessionID() string { return "" }
