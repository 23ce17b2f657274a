package executor

import (
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// The strict reading of an executor's binding config, written once for
// every executor: the problems it reports, and the walk that finds them.

// Codes of an executor config's problems shared by every executor (each
// may add its own).
const (
	CodeNullValue = "null_value"
	CodeWrongType = "wrong_type"
)

// ConfigProblem is one thing wrong with a binding's executor config. It
// never contains a configured value.
type ConfigProblem struct {
	// Pointer is the RFC 6901 pointer of the offending member inside the
	// binding's config ("" for the config itself).
	Pointer string
	Code    string
	Remedy  string
}

// ConfigError lists every problem of an executor config, in document
// order.
type ConfigError struct {
	// Executor names the executor whose config it is.
	Executor string
	Problems []ConfigProblem
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString("invalid " + e.Executor + " executor config")
	for i, p := range e.Problems {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		ptr := p.Pointer
		if ptr == "" {
			ptr = "(config)"
		}
		b.WriteString(ptr + ": " + p.Code + ": " + p.Remedy)
	}
	return b.String()
}

// ConfigWalker walks a syntactically valid config document with Dec,
// collecting problems; an executor's parser embeds it and adds its members.
type ConfigWalker struct {
	Executor string
	Dec      *jsontext.Decoder
	problems []ConfigProblem
}

// Add records a problem at ptr.
func (w *ConfigWalker) Add(ptr, code, remedy string) {
	w.problems = append(w.problems, ConfigProblem{Pointer: ptr, Code: code, Remedy: remedy})
}

// Err is the *ConfigError of the problems recorded, or nil for none.
func (w *ConfigWalker) Err() error {
	if len(w.problems) == 0 {
		return nil
	}
	return &ConfigError{Executor: w.Executor, Problems: w.problems}
}

// Expect consumes the start of a value of kind want ('{', '[', '"' or
// '0'). If the value is of another kind it records the problem (null_value
// or wrong_type), skips the value and returns false. For '"' and '0' the
// value is left to read.
func (w *ConfigWalker) Expect(ptr string, want jsontext.Kind, remedy string) bool {
	switch w.Dec.PeekKind() {
	case want:
		if want == '{' || want == '[' {
			w.Dec.ReadToken()
		}
		return true
	case 'n':
		w.Add(ptr, CodeNullValue, "remove the member or give it a value; "+remedy)
	default:
		w.Add(ptr, CodeWrongType, remedy)
	}
	w.Skip()
	return false
}

// Skip skips the next value.
func (w *ConfigWalker) Skip() { w.Dec.SkipValue() }

// ReadString reads the next value, a string.
func (w *ConfigWalker) ReadString() string {
	tok, _ := w.Dec.ReadToken()
	return tok.String()
}

// End consumes the closing '}' or ']'.
func (w *ConfigWalker) End() { w.Dec.ReadToken() }

// EscapePointer escapes a member name for an RFC 6901 pointer.
func EscapePointer(name string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(name)
}
