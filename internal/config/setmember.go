package config

import (
	"bytes"
	"errors"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// PointerError is SetMember's refusal of a pointer. Its message names only
// the part of the pointer that is safe to show (as a diagnostic's pointer
// does) and never the value or any configured value.
type PointerError struct {
	// Pointer is the nearest enclosing member of the problem that is safe
	// to show ("" for the document).
	Pointer string
	Message string
}

func (e *PointerError) Error() string { return e.Message }

// SetMember returns doc, a configuration document (one JSON object), with
// the member at the RFC 6901 pointer set to value (one JSON value): an
// existing object member or list element is replaced, and a missing
// member is added to an object that exists. Every other member keeps its
// text and its place; the result is indented with two spaces (compact when
// that would take it past MaxSize) and ends in a newline. It refuses, with
// a *PointerError, the empty pointer (the whole document), a malformed
// pointer, a pointer whose parent does not exist or is not an object or a
// list, and an index that is not one of the list's; and a value that is not
// one JSON value. It validates nothing else: the result goes through
// Validate like any document.
func SetMember(doc []byte, ptr string, value []byte) ([]byte, error) {
	v := jsontext.Value(bytes.TrimSpace(value))
	if len(v) == 0 || !v.IsValid() {
		return nil, &PointerError{Message: "the value is not one JSON value; quote a string, for example '\"text\"', and write a list as '[\"a\", \"b\"]'"}
	}
	if ptr == "" {
		return nil, &PointerError{Message: "the pointer names the whole document; to replace it, use open-conduit config apply FILE"}
	}
	if ptr[0] != '/' {
		return nil, &PointerError{Message: "a JSON pointer starts with '/', for example /scopes/ops/bindings/agent/operations"}
	}
	var tokens []string
	for _, raw := range strings.Split(ptr[1:], "/") {
		tok, ok := unescapePointerToken(raw)
		if !ok {
			return nil, &PointerError{Message: "the pointer holds a '~' not followed by 0 or 1; write '~' as ~0 and '/' as ~1"}
		}
		tokens = append(tokens, tok)
	}
	d := jsontext.Value(bytes.TrimSpace(doc))
	if !d.IsValid() || d.Kind() != '{' {
		return nil, errors.New("config: the document to change is not one JSON object")
	}
	out, err := setIn(d, tokens, v, nil)
	if err != nil {
		return nil, err
	}
	indented := jsontext.Value(bytes.Clone(out))
	if err := indented.Indent(jsontext.WithIndent("  ")); err != nil {
		return nil, err
	}
	if len(indented)+1 <= MaxSize {
		out = indented
	} else if err := out.Compact(); err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

func unescapePointerToken(s string) (string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '~' && (i+1 == len(s) || (s[i+1] != '0' && s[i+1] != '1')) {
			return "", false
		}
	}
	return unescapeToken.Replace(s), true
}

// setIn sets the member tokens name inside v; at is the path walked so far.
func setIn(v jsontext.Value, tokens []string, value jsontext.Value, at []step) (jsontext.Value, error) {
	if len(tokens) == 0 {
		return value, nil
	}
	name, rest := tokens[0], tokens[1:]
	switch v.Kind() {
	case '{':
		return setInObject(v, name, rest, value, at)
	case '[':
		return setInList(v, name, rest, value, at)
	}
	return nil, &PointerError{Pointer: pointer(safeSteps(at)),
		Message: "the member at " + showPointer(at) + " is neither an object nor a list, so it has no member to set; set it whole instead"}
}

func setInObject(v jsontext.Value, name string, rest []string, value jsontext.Value, at []step) (jsontext.Value, error) {
	here := append(append([]step(nil), at...), keyStep(name))
	dec := jsontext.NewDecoder(bytes.NewReader(v))
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	out := []byte{'{'}
	found := false
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, err
		}
		key := tok.String()
		member, err := dec.ReadValue()
		if err != nil {
			return nil, err
		}
		member = bytes.Clone(member)
		if key == name {
			found = true
			if member, err = setIn(member, rest, value, here); err != nil {
				return nil, err
			}
		}
		out = appendMember(out, key, member)
	}
	if !found {
		if len(rest) > 0 {
			return nil, &PointerError{Pointer: pointer(safeSteps(at)),
				Message: showPointer(here) + " does not exist in the active configuration, so nothing under it can be set; set it whole first (see open-conduit config get)"}
		}
		out = appendMember(out, name, value)
	}
	return append(out, '}'), nil
}

func appendMember(out []byte, name string, value jsontext.Value) []byte {
	if len(out) > 1 {
		out = append(out, ',')
	}
	out, _ = jsontext.AppendQuote(out, name)
	out = append(out, ':')
	return append(out, value...)
}

func setInList(v jsontext.Value, name string, rest []string, value jsontext.Value, at []step) (jsontext.Value, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(v))
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	var elems []jsontext.Value
	for dec.PeekKind() != ']' {
		e, err := dec.ReadValue()
		if err != nil {
			return nil, err
		}
		elems = append(elems, bytes.Clone(e))
	}
	idx, err := strconv.Atoi(name)
	if err != nil || idx < 0 || idx >= len(elems) || strconv.Itoa(idx) != name {
		have := "is empty"
		if len(elems) > 0 {
			have = "has elements 0 to " + strconv.Itoa(len(elems)-1) + " only"
		}
		return nil, &PointerError{Pointer: pointer(safeSteps(at)),
			Message: "the list at " + showPointer(at) + " " + have + ", and the pointer names none of them; to add an element, set the whole list"}
	}
	if elems[idx], err = setIn(elems[idx], rest, value, append(append([]step(nil), at...), idxStep(idx))); err != nil {
		return nil, err
	}
	out := []byte{'['}
	for i, e := range elems {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, e...)
	}
	return append(out, ']'), nil
}

// showPointer renders the safe part of a path for a message, "the
// document" for none.
func showPointer(path []step) string {
	safe := safeSteps(path)
	if len(safe) == 0 {
		return "the document"
	}
	s := pointer(safe)
	if len(safe) < len(path) {
		s += " (a member under it)"
	}
	return s
}
