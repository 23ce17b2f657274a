package packages

import (
	"bytes"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/open-conduit/open-conduit/extension"
)

// Diagnostic is one problem of a manifest: a JSON pointer into
// open-conduit-package.json ("" for the manifest as a whole), a stable code
// and a remedy. Like the configuration's, it never quotes a value of the
// manifest.
type Diagnostic struct {
	Pointer string
	Code    string
	Remedy  string
}

func (d Diagnostic) String() string {
	p := d.Pointer
	if p == "" {
		p = "(manifest)"
	}
	return p + ": " + d.Code + ": " + d.Remedy
}

// Warning is something a valid manifest probably did not mean.
type Warning struct {
	Pointer string
	Code    string
	Message string
}

// The diagnostic codes of a manifest (docs/packages.md lists each).
const (
	CodeManifestMissing    = "manifest_missing"    // no open-conduit-package.json in the directory
	CodeInvalidJSON        = "invalid_json"        // the manifest is not one JSON object
	CodeUnknownField       = "unknown_field"       // a member the manifest does not define
	CodeWrongType          = "wrong_type"          // a member of the wrong JSON type
	CodeMissingField       = "missing_field"       // a required member is absent or empty
	CodeInvalidName        = "invalid_name"        // a name breaks its rule
	CodeNameTaken          = "name_taken"          // the host or another package takes the name
	CodeDuplicate          = "duplicate"           // a name given twice
	CodeInvalidVersion     = "invalid_version"     // version is not a short printable word
	CodeInvalidKind        = "invalid_kind"        // kind is neither protocol nor mcp
	CodeOutsideNamespace   = "outside_namespace"   // an operation or toolset outside <name>.*
	CodeInvalidSchema      = "invalid_schema"      // an input schema that is not an object schema
	CodeInvalidValue       = "invalid_value"       // a member's value is not one it takes
	CodeUnknownOperation   = "unknown_operation"   // a toolset grants an operation the package does not provide
	CodeFileMissing        = "file_missing"        // a file the manifest names is not in the package
	CodePathOutside        = "path_outside"        // a path that leaves the package directory
	CodeInvalidPlaybook    = "invalid_playbook"    // a playbook's Markdown fails its check
	CodeUnknownPlaybook    = "unknown_playbook"    // an executor names a playbook nobody provides
	CodeUnknownPermission  = "unknown_permission"  // a permission outside the defined set
	CodePermissionRequired = "permission_required" // a provided feature whose permission is not asked for
	CodeEnvNotLiteral      = "env_not_literal"     // an env value that looks like a secret reference
	CodeMCPProvides        = "mcp_provides"        // a KindMCP manifest declares provides
	CodeUnreadable         = "unreadable"          // the package directory or a file cannot be read
	CodeUnsupportedFile    = "unsupported_file"    // a symlink, a device, or more files than install copies

	// WarnPermissionUnused: a permission asked for that nothing the
	// package provides uses.
	WarnPermissionUnused = "permission_unused"
)

// Permissions are the defined permissions, in the order install shows them.
var Permissions = []string{PermissionOperationGate, PermissionStartGate, PermissionEmit, PermissionExecutor}

// Reserved are names no package may take whatever the host registers:
// the builtins, core, the first-party registrations and the release's
// executors.
var Reserved = append([]string{"core", "os", "open-conduit", "github", "slack", "human", "introspection", "shell", "claude-code", "codex"}, extension.Builtins...)

// Limits of a package's files.
const (
	maxManifestBytes = 1 << 20
	maxPlaybookBytes = 1 << 20
	maxVersionLen    = 64
)

// CheckOptions say what else the host holds, against which a manifest is
// checked.
type CheckOptions struct {
	// Taken says whether a registration or executor name is the host's or
	// another installed package's (a package reinstalled over itself is
	// not "another"), and what takes it, in a short safe phrase ("a
	// registration of the host").
	Taken func(name string) (by string, taken bool)
	// Playbook says whether another registration provides a playbook of
	// this name: an executor may start its turns on one, and the package
	// may not provide one of the same name.
	Playbook func(pkg, name string) bool
}

// Checked is a manifest read and checked from a package directory.
type Checked struct {
	Manifest    Manifest
	Diagnostics []Diagnostic
	Warnings    []Warning
	// Playbooks are the playbooks' Markdown as read, when valid.
	Playbooks []extension.Playbook
}

// InvalidError refuses a package whose manifest does not check (or whose
// files cannot be installed), with every problem.
type InvalidError struct {
	Diagnostics []Diagnostic
	Warnings    []Warning
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("the package does not check: %d problems", len(e.Diagnostics))
}

// Valid reports whether the manifest has no problem.
func (c *Checked) Valid() bool { return len(c.Diagnostics) == 0 }

// Check reads dir's manifest strictly (an unknown member is refused) and
// checks it and the files it names. It changes nothing.
func Check(dir string, opts CheckOptions) *Checked {
	c := &Checked{}
	data, err := readLimited(filepath.Join(dir, ManifestFile), maxManifestBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		c.add("", CodeManifestMissing, "the directory has no "+ManifestFile+": give the package directory that holds it")
		return c
	case err != nil:
		c.add("", CodeUnreadable, "the manifest cannot be read: check that it is a regular file you can read, of at most 1 MiB")
		return c
	}
	if err := json.Unmarshal(data, &c.Manifest, json.RejectUnknownMembers(true)); err != nil {
		c.decodeProblem(err)
		return c
	}
	v := &checker{c: c, dir: dir, opts: opts}
	v.run()
	return c
}

func (c *Checked) add(ptr, code, remedy string) {
	c.Diagnostics = append(c.Diagnostics, Diagnostic{Pointer: ptr, Code: code, Remedy: remedy})
}

func (c *Checked) warn(ptr, code, msg string) {
	c.Warnings = append(c.Warnings, Warning{Pointer: ptr, Code: code, Message: msg})
}

// decodeProblem reports the first problem of strict decoding at its
// place, never quoting the value.
func (c *Checked) decodeProblem(err error) {
	var se *json.SemanticError
	if errors.As(err, &se) {
		ptr := string(se.JSONPointer)
		if strings.Contains(se.Error(), "unknown object member") {
			c.add(ptr, CodeUnknownField, "the manifest defines no such member: remove it or correct its spelling (docs/packages.md lists the members)")
			return
		}
		c.add(ptr, CodeWrongType, "this member has the wrong JSON type: see docs/packages.md for what it takes")
		return
	}
	var sx *jsontext.SyntacticError
	if errors.As(err, &sx) {
		if strings.Contains(sx.Error(), "duplicate object member") {
			c.add(string(sx.JSONPointer), CodeDuplicate, "a member is given twice in the same object: keep one")
			return
		}
		c.add(string(sx.JSONPointer), CodeInvalidJSON, "the manifest is not valid JSON here: correct its syntax")
		return
	}
	c.add("", CodeInvalidJSON, "the manifest must be one JSON object")
}

type checker struct {
	c    *Checked
	dir  string
	opts CheckOptions
	ops  map[string]string // operation name -> kind
}

func (v *checker) run() {
	m := &v.c.Manifest
	v.name()
	switch {
	case m.Version == "":
		v.c.add("/version", CodeMissingField, "give the package's version, such as 1.0.0")
	case !versionRE.MatchString(m.Version):
		v.c.add("/version", CodeInvalidVersion, "a version is up to 64 letters, digits, '.', '-', '+' or '_', such as 1.0.0")
	}
	switch m.Kind {
	case "", KindProtocol, KindMCP:
	default:
		v.c.add("/kind", CodeInvalidKind, `kind is "protocol" (the default) or "mcp"`)
	}
	v.runSpec()
	if m.Kind == KindMCP {
		if !isZeroProvides(m.Provides) {
			v.c.add("/provides", CodeMCPProvides, "an mcp package declares nothing it provides: its tools are listed from the server when it starts; remove provides")
		}
	} else {
		v.operations()
		v.toolsets()
		v.playbooks()
		v.executors()
	}
	v.permissions()
}

var versionRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.+_-]{0,63}$`)

func isZeroProvides(p Provides) bool {
	return len(p.Operations) == 0 && len(p.Toolsets) == 0 && !p.OperationGate && !p.StartGate && len(p.Executors) == 0 && len(p.Playbooks) == 0
}

func (v *checker) name() {
	name := v.c.Manifest.Name
	switch {
	case name == "":
		v.c.add("/name", CodeMissingField, "give the package's name: a lower-case letter followed by lower-case letters, digits, '-' or '_'")
		return
	case extension.RegistrationName(name) != nil:
		v.c.add("/name", CodeInvalidName, "a package name is a lower-case letter followed by lower-case letters, digits, '-' or '_', with no dot")
		return
	case slices.Contains(Reserved, name):
		v.c.add("/name", CodeNameTaken, "this name is one the host itself takes (a builtin, core, a first-party extension or an executor): choose another")
		return
	}
	if v.opts.Taken != nil {
		if by, taken := v.opts.Taken(name); taken {
			v.c.add("/name", CodeNameTaken, "this name is taken by "+by+": choose another")
		}
	}
}

// runSpec checks run: how the host starts the package.
func (v *checker) runSpec() {
	r := v.c.Manifest.Run
	if len(r.Command) == 0 {
		v.c.add("/run/command", CodeMissingField, "give the command that starts the package, as an argument vector such as [\"./server\"]")
	} else {
		for i, arg := range r.Command {
			if arg == "" {
				v.c.add(fmt.Sprintf("/run/command/%d", i), CodeInvalidValue, "an argument is empty: remove it")
			}
		}
		if prog := r.Command[0]; strings.Contains(prog, "/") {
			ptr := "/run/command/0"
			if rel, ok := v.inside(ptr, prog); ok {
				st, err := os.Lstat(filepath.Join(v.dir, filepath.FromSlash(rel)))
				switch {
				case err != nil || !st.Mode().IsRegular():
					v.c.add(ptr, CodeFileMissing, "the program is not a regular file of the package: a command with a slash is a path inside the package directory")
				case st.Mode().Perm()&0o100 == 0:
					v.c.add(ptr, CodeInvalidValue, "the program is not executable: chmod u+x it in the package directory")
				}
			}
		}
	}
	for _, k := range sortedKeys(r.Env) {
		ptr := "/run/env/" + escapePointer(k)
		if !envNameRE.MatchString(k) {
			v.c.add(ptr, CodeInvalidName, "an environment variable's name is letters, digits and '_', not starting with a digit")
			continue
		}
		if looksLikeReference(r.Env[k]) {
			v.c.add(ptr, CodeEnvNotLiteral, "env values are literal: a secret reaches a package through its extensions.<name>.config and the protocol, never its manifest")
		}
	}
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// looksLikeReference reports whether an env value reads like a secret
// reference or an expansion, which the host would not resolve.
func looksLikeReference(s string) bool {
	for _, p := range []string{"keyring:", "file:", "env:", "cmd:"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return strings.Contains(s, "${")
}

// inside checks that p is a relative path that stays inside the package
// directory, and returns it cleaned.
func (v *checker) inside(ptr, p string) (string, bool) {
	clean := path.Clean(filepath.ToSlash(p))
	if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") || clean == "." {
		v.c.add(ptr, CodePathOutside, "a path is relative to the package directory and stays inside it")
		return "", false
	}
	return clean, true
}

func (v *checker) operations() {
	m := &v.c.Manifest
	v.ops = map[string]string{}
	for i, op := range m.Provides.Operations {
		ptr := fmt.Sprintf("/provides/operations/%d", i)
		switch {
		case op.Name == "":
			v.c.add(ptr+"/name", CodeMissingField, "give the operation's name, <package>.<suffix>")
			continue
		case extension.IsBuiltin(op.Name):
			v.c.add(ptr+"/name", CodeNameTaken, "this is a builtin of the host: name the operation <package>.<suffix>")
			continue
		case !extension.OwnsOperation(m.Name, op.Name):
			v.c.add(ptr+"/name", CodeOutsideNamespace, "the operation is outside the package's namespace: name it <package>.<suffix>, with lower-case segments")
			continue
		}
		if _, dup := v.ops[op.Name]; dup {
			v.c.add(ptr+"/name", CodeDuplicate, "this operation is listed twice: keep one")
			continue
		}
		kind := op.Kind
		if kind == "" {
			kind = OperationCall
		}
		v.ops[op.Name] = kind
		if op.Summary == "" {
			v.c.add(ptr+"/summary", CodeMissingField, "give one sentence saying what the operation does")
		}
		if len(op.InputSchema) > 0 && !objectSchema(op.InputSchema) {
			v.c.add(ptr+"/input_schema", CodeInvalidSchema, `an input schema is a JSON Schema object whose type is "object"`)
		}
		switch kind {
		case OperationCall, OperationEmit, OperationWait:
		default:
			v.c.add(ptr+"/kind", CodeInvalidValue, `an operation's kind is "call" (the default), "emit" or "wait"`)
		}
		if op.Sensitive && kind != OperationCall {
			v.c.add(ptr+"/sensitive", CodeInvalidValue, "only a call operation can be sensitive: an emit's input becomes a stored Event")
		}
		for j, capab := range op.Capabilities {
			if extension.OperationName(capab) != nil {
				v.c.add(fmt.Sprintf("%s/capabilities/%d", ptr, j), CodeInvalidName, "a capability is a dotted lower-case name such as git.credential")
			}
		}
	}
}

// objectSchema reports whether raw is a JSON object whose type is
// "object".
func objectSchema(raw stdjson.RawMessage) bool {
	var s struct {
		Type stdjson.RawMessage `json:"type"`
	}
	dec := stdjson.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&s); err != nil || dec.More() {
		return false
	}
	return string(bytes.TrimSpace(s.Type)) == `"object"`
}

func (v *checker) toolsets() {
	m := &v.c.Manifest
	seen := map[string]bool{}
	for i, ts := range m.Provides.Toolsets {
		ptr := fmt.Sprintf("/provides/toolsets/%d", i)
		if ts.Name == "" {
			v.c.add(ptr+"/name", CodeMissingField, "give the toolset's name, <package>.<role>")
			continue
		}
		if !extension.OwnsOperation(m.Name, ts.Name) {
			v.c.add(ptr+"/name", CodeOutsideNamespace, "the toolset is outside the package's namespace: name it <package>.<role>")
			continue
		}
		if seen[ts.Name] {
			v.c.add(ptr+"/name", CodeDuplicate, "this toolset is listed twice: keep one")
			continue
		}
		seen[ts.Name] = true
		if len(ts.Operations) == 0 {
			v.c.add(ptr+"/operations", CodeMissingField, "a toolset grants at least one operation")
		}
		members := map[string]bool{}
		for j, op := range ts.Operations {
			optr := fmt.Sprintf("%s/operations/%d", ptr, j)
			switch {
			case op.Name == "":
				v.c.add(optr+"/name", CodeMissingField, "give the operation's name")
			case members[op.Name]:
				v.c.add(optr+"/name", CodeDuplicate, "this operation is listed twice in the toolset: keep one")
			case extension.IsBuiltin(op.Name):
			case !extension.OwnsOperation(m.Name, op.Name):
				v.c.add(optr+"/name", CodeOutsideNamespace, "a toolset grants only the package's own operations and builtins")
			case v.ops[op.Name] == "":
				v.c.add(optr+"/name", CodeUnknownOperation, "the package provides no such operation: list it in provides.operations or remove it here")
			}
			members[op.Name] = true
			if op.Since == "" {
				v.c.add(optr+"/since", CodeMissingField, "give the package version the operation joined the toolset in")
			}
		}
	}
}

func (v *checker) playbooks() {
	m := &v.c.Manifest
	seen := map[string]bool{}
	for i, pb := range m.Provides.Playbooks {
		ptr := fmt.Sprintf("/provides/playbooks/%d", i)
		if seen[pb.Name] {
			v.c.add(ptr+"/name", CodeDuplicate, "this playbook is listed twice: keep one")
			continue
		}
		seen[pb.Name] = true
		if v.opts.Playbook != nil && v.opts.Playbook(m.Name, pb.Name) {
			v.c.add(ptr+"/name", CodeNameTaken, "another extension or the operator's playbooks already have a playbook of this name: choose another")
		}
		if pb.File == "" {
			v.c.add(ptr+"/file", CodeMissingField, "give the path of the playbook's Markdown, relative to the package directory")
			continue
		}
		rel, ok := v.inside(ptr+"/file", pb.File)
		if !ok {
			continue
		}
		full := filepath.Join(v.dir, filepath.FromSlash(rel))
		if st, err := os.Lstat(full); err != nil || !st.Mode().IsRegular() {
			v.c.add(ptr+"/file", CodeFileMissing, "the playbook's file is not a regular file of the package")
			continue
		}
		data, err := readLimited(full, maxPlaybookBytes)
		if err != nil {
			v.c.add(ptr+"/file", CodeUnreadable, "the playbook's file cannot be read (at most 1 MiB)")
			continue
		}
		p := extension.Playbook{Name: pb.Name, Markdown: string(data)}
		if err := extension.CheckPlaybook(p); err != nil {
			if !playbookNameOK(pb.Name) {
				v.c.add(ptr+"/name", CodeInvalidName, "a playbook name is a lower-case letter followed by up to 62 lower-case letters, digits, '-' or '_'")
			} else {
				v.c.add(ptr+"/file", CodeInvalidPlaybook, "the playbook must start with a frontmatter listing its operations (operations: [...]) between lines ---; see docs/extensions.md")
			}
			continue
		}
		v.c.Playbooks = append(v.c.Playbooks, p)
	}
}

func playbookNameOK(name string) bool {
	return extension.CheckPlaybook(extension.Playbook{Name: name, Markdown: "---\noperations: []\n---\n"}) == nil
}

func (v *checker) executors() {
	m := &v.c.Manifest
	seen := map[string]bool{}
	for i, ex := range m.Provides.Executors {
		ptr := fmt.Sprintf("/provides/executors/%d", i)
		switch {
		case ex.Kind == "":
			v.c.add(ptr+"/kind", CodeMissingField, "give the executor's kind: bindings name it executor <package>.<kind>")
			continue
		case extension.RegistrationName(ex.Kind) != nil:
			v.c.add(ptr+"/kind", CodeInvalidName, "an executor's kind is a lower-case letter followed by lower-case letters, digits, '-' or '_'")
			continue
		case seen[ex.Kind]:
			v.c.add(ptr+"/kind", CodeDuplicate, "this executor is listed twice: keep one")
			continue
		}
		seen[ex.Kind] = true
		if ex.Playbook == "" {
			continue
		}
		own := slices.ContainsFunc(m.Provides.Playbooks, func(p Playbook) bool { return p.Name == ex.Playbook })
		if !own && (v.opts.Playbook == nil || !v.opts.Playbook(m.Name, ex.Playbook)) {
			v.c.add(ptr+"/playbook", CodeUnknownPlaybook, "no playbook of this name is provided here or registered by another extension: list it in provides.playbooks or correct the name")
		}
	}
}

// permissions checks the permissions asked for against the defined set
// and against what the package provides.
func (v *checker) permissions() {
	m := &v.c.Manifest
	asked := map[string]bool{}
	for i, p := range m.Permissions {
		ptr := fmt.Sprintf("/permissions/%d", i)
		switch {
		case !slices.Contains(Permissions, p):
			v.c.add(ptr, CodeUnknownPermission, "no such permission: a package asks for "+strings.Join(Permissions, ", ")+" (docs/packages.md)")
		case asked[p]:
			v.c.add(ptr, CodeDuplicate, "this permission is asked for twice: keep one")
		}
		asked[p] = true
	}
	used := map[string]bool{}
	need := func(perm, ptr, feature string) {
		used[perm] = true
		if !asked[perm] {
			v.c.add(ptr, CodePermissionRequired, feature+" needs the permission "+perm+": add it to permissions, where the operator sees it at install")
		}
	}
	if m.Provides.OperationGate {
		need(PermissionOperationGate, "/provides/operation_gate", "a gate")
	}
	if m.Provides.StartGate {
		need(PermissionStartGate, "/provides/start_gate", "a start gate")
	}
	for i, op := range m.Provides.Operations {
		if op.Kind == OperationEmit {
			need(PermissionEmit, fmt.Sprintf("/provides/operations/%d/kind", i), "an emit operation")
		}
	}
	if len(m.Provides.Executors) > 0 {
		need(PermissionExecutor, "/provides/executors", "an executor")
	}
	for i, p := range m.Permissions {
		if slices.Contains(Permissions, p) && !used[p] && !slices.Contains(m.Permissions[:i], p) {
			v.c.warn(fmt.Sprintf("/permissions/%d", i), WarnPermissionUnused, "nothing the package provides uses this permission: remove it, so the operator is not asked for it")
		}
	}
}

// readLimited reads a regular file of at most limit bytes.
func readLimited(name string, limit int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	if st.Size() > limit {
		return nil, errors.New("too large")
	}
	data := make([]byte, 0, st.Size())
	buf := bytes.NewBuffer(data)
	if _, err := buf.ReadFrom(f); err != nil {
		return nil, err
	}
	if int64(buf.Len()) > limit {
		return nil, errors.New("too large")
	}
	return buf.Bytes(), nil
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
