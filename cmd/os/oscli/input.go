package oscli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// readJSON turns a JSON|@FILE|- flag value into JSON: "-" reads standard
// input, "@path" reads a file, anything else is the JSON itself; an empty
// value is no JSON (nil). With object, only a JSON object is accepted. The
// value is never echoed back: it may hold something the caller keeps
// private.
func readJSON(flag, value string, in io.Reader, object bool) (json.RawMessage, error) {
	var b []byte
	switch {
	case value == "":
		return nil, nil
	case value == "-":
		var err error
		if b, err = io.ReadAll(in); err != nil {
			return nil, usagef("--%s -: read standard input: %v", flag, err)
		}
	case strings.HasPrefix(value, "@"):
		var err error
		if b, err = os.ReadFile(value[1:]); err != nil {
			return nil, usagef("--%s: %v", flag, err)
		}
	default:
		b = []byte(value)
	}
	b = bytes.TrimSpace(b)
	if !json.Valid(b) {
		// Where, never what: the decoder's own message quotes a character
		// of the value.
		where := "it is empty or ends early"
		var v any
		var se *json.SyntaxError
		if err := json.Unmarshal(b, &v); errors.As(err, &se) && se.Offset < int64(len(b)) {
			where = fmt.Sprintf("a syntax error at byte %d", se.Offset)
		}
		return nil, usagef("--%s is not valid JSON (%s); pass JSON, @FILE or - for standard input", flag, where)
	}
	if object && b[0] != '{' {
		return nil, usagef("--%s must be a JSON object, such as {\"key\":\"value\"}", flag)
	}
	return json.RawMessage(b), nil
}

// printJSON writes v indented, with a trailing newline.
func printJSON(w io.Writer, raw json.RawMessage) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		// Not ours to fix: print what came.
		buf.Reset()
		buf.Write(raw)
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// noteReplayed tells the person that a result is a replay.
func noteReplayed(w io.Writer, replayed bool) {
	if replayed {
		fmt.Fprintln(w, "os: replayed: this is the result committed for an earlier call with the same request ID")
	}
}
