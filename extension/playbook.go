package extension

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Playbook is a Markdown skill an agent starts its turns on. Its
// frontmatter lists the operations it relies on (see PlaybookOperations);
// the host writes it where agent CLIs read skills, as
// skills/<Name>/SKILL.md.
type Playbook struct {
	// Name is a lower-case letter followed by up to 62 lower-case
	// letters, digits, '-' or '_'.
	Name string
	// Markdown is the whole skill, frontmatter first.
	Markdown string
}

// PlaybookNamer is implemented by an executor whose agents start their
// turns on a playbook: given a binding's executor config, already checked
// by the executor, it names the playbook ("" for none). Validation asks it
// once per binding config.
type PlaybookNamer interface {
	PlaybookName(config json.RawMessage) string
}

// CheckPlaybook checks a playbook's name and its frontmatter.
func CheckPlaybook(p Playbook) error {
	if !playbookName(p.Name) {
		return fmt.Errorf("%w: playbook name %q must be a lower-case letter followed by up to 62 lower-case letters, digits, '-' or '_'", ErrInvalid, p.Name)
	}
	if _, err := PlaybookOperations(p.Markdown); err != nil {
		return fmt.Errorf("playbook %s: %w", p.Name, err)
	}
	return nil
}

func playbookName(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z':
		case i > 0 && (r >= '0' && r <= '9' || r == '-' || r == '_'):
		default:
			return false
		}
	}
	return true
}

// PlaybookOperations reads the operations a playbook declares it relies
// on from its frontmatter: the document starts with a line "---" and the
// frontmatter ends at the next line "---". Each frontmatter line is blank,
// a comment (#), "key: value" with the key at the start of the line, or an
// indented continuation of the key before it. The key operations appears
// exactly once, as a flow list (operations: [emit, github.issue.view]) or
// as a block list of "- name" lines under it; each item is an operation
// name (OperationName), optionally quoted, named once. Anything else is
// ErrInvalid, naming the line but never quoting it.
func PlaybookOperations(markdown string) ([]string, error) {
	lines := strings.Split(strings.ReplaceAll(markdown, "\r\n", "\n"), "\n")
	if len(lines) == 0 || lines[0] != "---" {
		return nil, fmt.Errorf("%w: a playbook starts with a frontmatter line ---", ErrInvalid)
	}
	end := -1
	for i := 1; i < len(lines); i++ {
		if lines[i] == "---" {
			end = i
			break
		}
	}
	if end < 0 {
		return nil, fmt.Errorf("%w: the playbook's frontmatter has no closing line ---", ErrInvalid)
	}
	var (
		ops     []string
		found   bool
		inBlock bool // reading "- name" lines under operations:
		keys    = map[string]bool{}
		prevKey string
	)
	for i := 1; i < end; i++ {
		line, n := lines[i], i+1
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			switch {
			case inBlock:
				item, ok := strings.CutPrefix(trimmed, "-")
				if !ok || (item != "" && item[0] != ' ') {
					return nil, fmt.Errorf("%w: frontmatter line %d: a line under operations: is \"- <operation>\"", ErrInvalid, n)
				}
				var err error
				if ops, err = addOperation(ops, item, n); err != nil {
					return nil, err
				}
			case prevKey == "":
				return nil, fmt.Errorf("%w: frontmatter line %d is indented but continues no key", ErrInvalid, n)
			}
			continue
		}
		inBlock = false
		key, value, ok := strings.Cut(line, ":")
		if !ok || !frontmatterKey(key) {
			return nil, fmt.Errorf("%w: frontmatter line %d is not \"key: value\"", ErrInvalid, n)
		}
		if keys[key] {
			return nil, fmt.Errorf("%w: frontmatter line %d repeats a key", ErrInvalid, n)
		}
		keys[key], prevKey = true, key
		if key != "operations" {
			continue
		}
		found = true
		value = strings.TrimSpace(value)
		if value == "" {
			inBlock, ops = true, []string{}
			continue
		}
		inner, open := strings.CutPrefix(value, "[")
		inner, closed := strings.CutSuffix(inner, "]")
		if !open || !closed {
			return nil, fmt.Errorf("%w: frontmatter line %d: operations is a list, [a, b] or \"- a\" lines under it", ErrInvalid, n)
		}
		ops = []string{}
		if strings.TrimSpace(inner) == "" {
			continue
		}
		for _, item := range strings.Split(inner, ",") {
			var err error
			if ops, err = addOperation(ops, item, n); err != nil {
				return nil, err
			}
		}
	}
	if !found {
		return nil, fmt.Errorf("%w: the playbook's frontmatter has no operations: list (write operations: [] for none)", ErrInvalid)
	}
	return ops, nil
}

func addOperation(ops []string, item string, line int) ([]string, error) {
	name := strings.TrimSpace(item)
	if len(name) >= 2 && (name[0] == '"' || name[0] == '\'') && name[len(name)-1] == name[0] {
		name = name[1 : len(name)-1]
	}
	if OperationName(name) != nil {
		return nil, fmt.Errorf("%w: frontmatter line %d: an item of operations is not an operation name", ErrInvalid, line)
	}
	for _, op := range ops {
		if op == name {
			return nil, fmt.Errorf("%w: frontmatter line %d names an operation twice", ErrInvalid, line)
		}
	}
	return append(ops, name), nil
}

func frontmatterKey(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case i > 0 && (r >= '0' && r <= '9' || r == '-' || r == '_'):
		default:
			return false
		}
	}
	return true
}
