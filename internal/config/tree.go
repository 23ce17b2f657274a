package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/go-json-experiment/json/jsontext"
)

// MaxSize is the largest configuration file accepted: 1 MiB.
const MaxSize = 1 << 20

// MaxDepth bounds how deep values nest (the top-level object is depth 1).
// A configuration needs far fewer levels; the bound keeps the cost of
// reading a hostile document, and of every diagnostic's pointer, linear in
// its size.
const MaxDepth = 64

// kind is the JSON kind of a node.
type kind uint8

const (
	kindNull kind = iota + 1
	kindBool
	kindNumber
	kindString
	kindObject
	kindArray
)

// node is one value of the parsed document. Objects keep their members in
// document order, first occurrence only.
type node struct {
	parent  *node
	at      step // where the node sits in its parent
	kind    kind
	text    string // a string's value or a number's literal text
	boolean bool
	members []member
	elems   []*node
	// bad marks a value already reported (null, invalid UTF-8), which the
	// schema then skips without a second diagnostic.
	bad bool
}

type member struct {
	name  string
	value *node
}

// path returns the steps from the document's root to n.
func (n *node) path() []step {
	var rev []step
	for c := n; c != nil && c.parent != nil; c = c.parent {
		rev = append(rev, c.at)
	}
	out := make([]step, len(rev))
	for i, s := range rev {
		out[len(rev)-1-i] = s
	}
	return out
}

// child returns the path of n's member name.
func (n *node) child(name string) []step { return append(n.path(), keyStep(name)) }

// errStop ends the walk after a syntax error has been reported.
var errStop = errors.New("stop")

// treeBuilder turns the document into nodes, reporting duplicate keys,
// nulls and invalid UTF-8 where they are and continuing past them. A syntax
// error ends the walk, since nothing after it can be read reliably.
type treeBuilder struct {
	data []byte
	dec  *jsontext.Decoder
	is   *issues
}

// parseTree parses data, which is at most MaxSize bytes. It returns the
// root, or nil when the document is not syntactically JSON.
func parseTree(data []byte, is *issues) *node {
	b := &treeBuilder{
		data: data,
		// Duplicate names and invalid UTF-8 are allowed here only so that
		// the walk can report each one where it is and keep going.
		dec: jsontext.NewDecoder(bytes.NewReader(data),
			jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)),
		is: is,
	}
	if len(bytes.TrimSpace(data)) == 0 {
		is.add(nil, CodeInvalidJSON, `the file is empty: a configuration is one JSON object, starting with {"version": 1`)
		return nil
	}
	root, err := b.value(nil, step{}, 1)
	if err != nil {
		return nil
	}
	if _, err := b.dec.ReadToken(); err != io.EOF {
		is.add(nil, CodeInvalidJSON, "remove what follows the end of the top-level object"+b.where(err)+": a configuration is exactly one JSON object")
	}
	return root
}

// where describes the place of a syntax error by line and column, never by
// the text there.
func (b *treeBuilder) where(err error) string {
	var se *jsontext.SyntacticError
	if !errors.As(err, &se) {
		return ""
	}
	off := int(min(max(se.ByteOffset, 0), int64(len(b.data))))
	line := 1 + bytes.Count(b.data[:off], []byte("\n"))
	col := off - bytes.LastIndexByte(b.data[:off], '\n')
	return fmt.Sprintf(" (line %d, column %d)", line, col)
}

// syntax reports a syntax error at path and stops the walk.
func (b *treeBuilder) syntax(path []step, err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || err == io.EOF {
		b.is.add(path, CodeInvalidJSON, "the document ends too early"+b.where(err)+": close every string, array and object")
		return errStop
	}
	b.is.add(path, CodeInvalidJSON, "fix the JSON syntax"+b.where(err)+": look for a missing comma, quote, colon or bracket there")
	return errStop
}

const remedyUTF8 = "the text is not valid UTF-8 (or has an unpaired surrogate escape): save the file as UTF-8 and retype this string"

// unquote decodes a raw JSON string and reports whether it was valid
// UTF-8 with no unpaired surrogate escape.
func unquote(raw jsontext.Value) (string, bool) {
	s, err := jsontext.AppendUnquote(nil, raw)
	return string(s), err == nil
}

func (b *treeBuilder) value(parent *node, at step, depth int) (*node, error) {
	n := &node{parent: parent, at: at}
	if k := b.dec.PeekKind(); depth > MaxDepth && (k == '{' || k == '[') {
		b.is.add(n.path(), CodeTooDeep, fmt.Sprintf("objects and arrays nest more than %d levels deep here: a configuration never needs that many, so flatten it", MaxDepth))
		return nil, errStop
	}
	switch b.dec.PeekKind() {
	case '{':
		if _, err := b.dec.ReadToken(); err != nil {
			return nil, b.syntax(n.path(), err)
		}
		n.kind = kindObject
		seen := map[string]bool{}
		for {
			switch b.dec.PeekKind() {
			case '}':
				if _, err := b.dec.ReadToken(); err != nil {
					return nil, b.syntax(n.path(), err)
				}
				return n, nil
			case '"':
			default:
				_, err := b.dec.ReadToken()
				return nil, b.syntax(n.path(), errOr(err))
			}
			raw, err := b.dec.ReadValue()
			if err != nil {
				return nil, b.syntax(n.path(), err)
			}
			name, ok := unquote(raw)
			if !ok {
				b.is.add(n.child(name), CodeInvalidJSON, remedyUTF8)
			}
			if seen[name] {
				b.is.add(n.child(name), CodeDuplicateKey, "keep one member of this name in its object and remove the others: a repeated key is never merged")
				if err := b.dec.SkipValue(); err != nil {
					return nil, b.syntax(n.child(name), err)
				}
				continue
			}
			seen[name] = true
			v, err := b.value(n, keyStep(name), depth+1)
			if err != nil {
				return nil, err
			}
			n.members = append(n.members, member{name: name, value: v})
		}
	case '[':
		if _, err := b.dec.ReadToken(); err != nil {
			return nil, b.syntax(n.path(), err)
		}
		n.kind = kindArray
		for {
			if b.dec.PeekKind() == ']' {
				if _, err := b.dec.ReadToken(); err != nil {
					return nil, b.syntax(n.path(), err)
				}
				return n, nil
			}
			v, err := b.value(n, idxStep(len(n.elems)), depth+1)
			if err != nil {
				return nil, err
			}
			n.elems = append(n.elems, v)
		}
	case '"':
		raw, err := b.dec.ReadValue()
		if err != nil {
			return nil, b.syntax(n.path(), err)
		}
		n.kind = kindString
		s, ok := unquote(raw)
		n.text = s
		if !ok {
			n.bad = true
			b.is.add(n.path(), CodeInvalidJSON, remedyUTF8)
		}
		return n, nil
	case '0':
		raw, err := b.dec.ReadValue()
		if err != nil {
			return nil, b.syntax(n.path(), err)
		}
		n.kind = kindNumber
		n.text = string(raw)
		return n, nil
	case 't', 'f':
		raw, err := b.dec.ReadValue()
		if err != nil {
			return nil, b.syntax(n.path(), err)
		}
		n.kind = kindBool
		n.boolean = raw[0] == 't'
		return n, nil
	case 'n':
		if _, err := b.dec.ReadValue(); err != nil {
			return nil, b.syntax(n.path(), err)
		}
		n.kind = kindNull
		n.bad = true
		b.is.add(n.path(), CodeNullValue, "remove this member to use its default, or give it a value: null is never a value in this file")
		return n, nil
	default:
		_, err := b.dec.ReadToken()
		return nil, b.syntax(n.path(), errOr(err))
	}
}

// errOr returns err, or a syntax-shaped error when the decoder gave none
// where a value was expected.
func errOr(err error) error {
	if err == nil {
		return errors.New("unexpected token")
	}
	return err
}

// encode appends n as compact JSON. Values at a path for which redact
// returns true are written as the string it gives instead.
func (n *node) encode(enc *jsontext.Encoder, redact func(*node) (string, bool)) error {
	if redact != nil {
		if s, ok := redact(n); ok {
			return enc.WriteToken(jsontext.String(s))
		}
	}
	switch n.kind {
	case kindNull:
		return enc.WriteToken(jsontext.Null)
	case kindBool:
		return enc.WriteToken(jsontext.Bool(n.boolean))
	case kindNumber:
		return enc.WriteValue(jsontext.Value(n.text))
	case kindString:
		return enc.WriteToken(jsontext.String(n.text))
	case kindArray:
		if err := enc.WriteToken(jsontext.BeginArray); err != nil {
			return err
		}
		for _, e := range n.elems {
			if err := e.encode(enc, redact); err != nil {
				return err
			}
		}
		return enc.WriteToken(jsontext.EndArray)
	case kindObject:
		if err := enc.WriteToken(jsontext.BeginObject); err != nil {
			return err
		}
		for _, m := range n.members {
			if err := enc.WriteToken(jsontext.String(m.name)); err != nil {
				return err
			}
			if err := m.value.encode(enc, redact); err != nil {
				return err
			}
		}
		return enc.WriteToken(jsontext.EndObject)
	}
	return fmt.Errorf("config: node of unknown kind %d", n.kind)
}

// canonical returns n as canonical JSON (RFC 8785: members sorted, no white
// space, numbers in their shortest form), with redaction applied.
func (n *node) canonical(redact func(*node) (string, bool)) ([]byte, error) {
	var buf bytes.Buffer
	enc := jsontext.NewEncoder(&buf)
	if err := n.encode(enc, redact); err != nil {
		return nil, err
	}
	v := jsontext.Value(bytes.TrimSpace(buf.Bytes()))
	if err := v.Canonicalize(); err != nil {
		return nil, err
	}
	return v, nil
}
