package api_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/api"
)

// The documented request and response examples are held to the wire
// types: every fenced example of a body in these docs is preceded by a
// comment naming the type of package api it is, for example
//
//	<!-- api: CreatedWork -->
//
// and is decoded into that type strictly (an unknown member fails), so a
// documented field the server does not have, or a misspelled one, fails.
// A member the type holds as raw JSON (a toolbelt call's input or
// result) is named after a semicolon and decoded strictly too:
//
//	<!-- api: CallResponse; result: EmitResult -->
//
// Placeholders the docs use for what an example leaves out are accepted:
// an object {…Work…}, a list […], and a string with "…" where a time
// goes.
var docs = []string{"../docs/api.md", "../docs/toolbelt.md"}

// docTypes are the types an example may name.
var docTypes = map[string]reflect.Type{}

func init() {
	for _, v := range []any{
		api.ErrorEnvelope{}, api.Health{},
		api.Issued{}, api.IssueRequest{}, api.RevokeRequest{}, api.Revoked{},
		api.Scope{}, api.TraceRequest{}, api.Trace{},
		api.Work{}, api.CreateWorkRequest{}, api.CreatedWork{}, api.ControlRequest{}, api.Controlled{}, api.WakeRequest{}, api.Woken{},
		api.HoldRequest{}, api.RebindRequest{}, api.AttachRequest{},
		api.Event{}, api.EmitRequest{}, api.Emitted{},
		api.Execution{}, api.Run{}, api.Wait{}, api.Artifact{},
		api.Config{}, api.ValidateRequest{}, api.Validation{}, api.ApplyRequest{}, api.SetRequest{}, api.Applied{},
		api.ToolbeltCall{}, api.ActRequest{}, api.Acted{},
		api.CallRequest{}, api.CallResponse{}, api.Guidance{}, api.Serving{},
		api.EmitInput{}, api.EmitResult{}, api.CreateWorkInput{}, api.CreateWorkResult{},
		api.WaitInput{}, api.OutcomeInput{}, api.DeclaredResult{}, api.ReadContextResult{}, api.GitCredentialInput{},
		api.Operator{}, api.Action{}, api.RouteSample{}, api.EgressConnection{},
		api.ReconcileRequest{}, api.Reconciled{},
		api.Package{}, api.PackageProblem{}, api.InspectPackageRequest{}, api.PackageInspection{}, api.InstallPackageRequest{}, api.InstalledPackage{}, api.RemovedPackage{},
	} {
		t := reflect.TypeOf(v)
		docTypes[t.Name()] = t
	}
	// A page names its items' type; the bare Page is the shape every list
	// shares, whatever its items.
	docTypes["Page"] = reflect.TypeFor[api.Page[json.RawMessage]]()
	docTypes["Page[Operator]"] = reflect.TypeFor[api.Page[api.Operator]]()
	docTypes["Page[Action]"] = reflect.TypeFor[api.Page[api.Action]]()
}

// example is one fenced block of a doc.
type example struct {
	doc  string
	line int
	lang string
	tag  string // the api comment's text, "" when there is none
	body string
}

var apiTag = regexp.MustCompile(`^<!--\s*api:\s*(.*?)\s*-->$`)

// examples reads the fenced blocks of a markdown file, each with the api
// comment on the last non-blank line before it.
func examples(t *testing.T, path string) []example {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []example
	var cur *example
	last := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &example{doc: path, line: n, lang: strings.TrimPrefix(line, "```")}
			if m := apiTag.FindStringSubmatch(strings.TrimSpace(last)); m != nil {
				cur.tag = m[1]
			}
		case cur != nil && strings.HasPrefix(line, "```"):
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.body += line + "\n"
		}
		if strings.TrimSpace(line) != "" {
			last = line
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Fatalf("%s:%d: the fenced block is never closed", path, cur.line)
	}
	return out
}

// isBody reports whether a block is a JSON example: marked json, or
// starting with an object.
func (e example) isBody() bool {
	return e.lang == "json" || strings.HasPrefix(strings.TrimSpace(e.body), "{")
}

var (
	objectPlaceholder = regexp.MustCompile(`\{…[^{}]*\}`)
	listPlaceholder   = regexp.MustCompile(`\[\s*…\s*\]`)
)

// decodeStrict decodes a documented example into a fresh t, refusing
// unknown members, after its placeholders are filled in.
func decodeStrict(body []byte, t reflect.Type) (reflect.Value, error) {
	text := objectPlaceholder.ReplaceAllString(string(body), "{}")
	text = listPlaceholder.ReplaceAllString(text, "[]")
	var generic any
	if err := json.Unmarshal([]byte(text), &generic); err != nil {
		return reflect.Value{}, fmt.Errorf("not JSON once its placeholders are filled in: %w", err)
	}
	filled, err := json.Marshal(fillTimes(generic, t))
	if err != nil {
		return reflect.Value{}, err
	}
	v := reflect.New(t)
	dec := json.NewDecoder(bytes.NewReader(filled))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v.Interface()); err != nil {
		return reflect.Value{}, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return reflect.Value{}, errors.New("more than one JSON value")
	}
	return v.Elem(), nil
}

var timeType = reflect.TypeFor[time.Time]()

// fillTimes replaces a placeholder string ("…") where t holds a time with
// a time, so that the strict decode judges the members, not the
// placeholder.
func fillTimes(v any, t reflect.Type) any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch x := v.(type) {
	case string:
		if t == timeType && strings.Contains(x, "…") {
			return "2026-03-01T12:00:00Z"
		}
	case []any:
		if t.Kind() == reflect.Slice {
			for i := range x {
				x[i] = fillTimes(x[i], t.Elem())
			}
		}
	case map[string]any:
		switch t.Kind() {
		case reflect.Map:
			for k := range x {
				x[k] = fillTimes(x[k], t.Elem())
			}
		case reflect.Struct:
			for k := range x {
				if f, ok := fieldByJSONName(t, k); ok {
					x[k] = fillTimes(x[k], f.Type)
				}
			}
		}
	}
	return v
}

func fieldByJSONName(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == name || (tag == "" && strings.EqualFold(f.Name, name)) {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// check decodes e as its tag says: the type, then each named raw member.
func check(e example) error {
	parts := strings.Split(e.tag, ";")
	name := strings.TrimSpace(parts[0])
	t, ok := docTypes[name]
	if !ok {
		return fmt.Errorf("the example names %q, which is no type of package api this test knows", name)
	}
	v, err := decodeStrict([]byte(e.body), t)
	if err != nil {
		return fmt.Errorf("as %s: %w", name, err)
	}
	for _, p := range parts[1:] {
		member, sub, ok := strings.Cut(p, ":")
		member, sub = strings.TrimSpace(member), strings.TrimSpace(sub)
		st, known := docTypes[sub]
		if !ok || !known {
			return fmt.Errorf("the example's tag part %q is not member: Type of a known type", p)
		}
		f, ok := fieldByJSONName(t, member)
		if !ok || f.Type != reflect.TypeFor[json.RawMessage]() {
			return fmt.Errorf("%s has no raw JSON member %q", name, member)
		}
		if _, err := decodeStrict(v.FieldByIndex(f.Index).Bytes(), st); err != nil {
			return fmt.Errorf("its %s as %s: %w", member, sub, err)
		}
	}
	return nil
}

func TestDocumentedExamplesDecodeIntoTheWireTypes(t *testing.T) {
	for _, doc := range docs {
		bodies := 0
		for _, e := range examples(t, doc) {
			if !e.isBody() {
				continue
			}
			bodies++
			if e.tag == "" {
				t.Errorf("%s:%d: a JSON example with no <!-- api: Type --> comment before it", e.doc, e.line)
				continue
			}
			if err := check(e); err != nil {
				t.Errorf("%s:%d: %v", e.doc, e.line, err)
			}
		}
		if bodies == 0 {
			t.Errorf("%s has no JSON example; the test reads the wrong file", doc)
		}
	}
}

// The check fails on what it is there to catch: a member the type lacks
// (misspelled or never there), in the body or in a named raw member, an
// example that is not JSON, and a type the test does not know.
func TestDocumentedExampleCheckRefuses(t *testing.T) {
	for _, c := range []struct{ tag, body string }{
		{"CreateWorkResult", `{"work_id":"wrk_1","created_event_id":"evt_1","created_event":"evt_1"}`},
		{"Work", `{"id":"wrk_…","scope":"setup","stat":"ready","created_at":"…"}`},
		{"Page[Operator]", `{"items":[{"name":"alice","token":"…"}]}`},
		{"CallResponse; result: EmitResult", `{"operation":"emit","result":{"event_id":"evt_1","sequence":1},"replayed":false}`},
		{"CallRequest; input: EmitInput", `{"operation":"emit","input":{"type":"a.b","source":"core.manual"}}`},
		{"Health", `{"status":"ok",}`},
		{"Healthy", `{"status":"ok"}`},
		{"CallResponse; replayed: EmitResult", `{"operation":"emit","result":{},"replayed":false}`},
	} {
		if err := check(example{tag: c.tag, body: c.body}); err == nil {
			t.Errorf("%s %s passed the check; it must fail", c.tag, c.body)
		}
	}
	// And it passes what it must: placeholders for left-out parts.
	ok := example{tag: "CreatedWork", body: `{"work":{…Work…},"created_event":{…Event…},"input_event":{…Event…},"existing":false}`}
	if err := check(ok); err != nil {
		t.Errorf("placeholders: %v", err)
	}
}

// The docs' tables give shapes in shorthand: `{"name","role"?}` lists a
// body's members, `?` marking an optional one, and a member may carry an
// illustration of its value (`"timeout"?: "10m"`, a nested shape). The
// route table of api.md gives each route's request shape and response
// type; the builtins table of toolbelt.md each operation's input and
// result. A shorthand must list every member the type always sends (one
// without omitempty) and no member the type lacks.

// routeRequests is the request type of every route the route table gives
// a body shape.
var routeRequests = map[string]any{
	"POST /v1/auth/rotate":             struct{}{},
	"POST /v1/auth/revoke":             api.RevokeRequest{},
	"POST /v1/auth/operators":          api.IssueRequest{},
	"POST /v1/scopes/{id}/route/trace": api.TraceRequest{},
	"POST /v1/scopes/reconcile":        api.ReconcileRequest{},
	"POST /v1/work":                    api.CreateWorkRequest{},
	"POST /v1/work/{id}/cancel":        api.ControlRequest{},
	"POST /v1/work/{id}/retry":         api.ControlRequest{},
	"POST /v1/work/{id}/hold":          api.HoldRequest{},
	"POST /v1/work/{id}/release":       api.ControlRequest{},
	"POST /v1/work/{id}/rebind":        api.RebindRequest{},
	"POST /v1/work/{id}/attach":        api.AttachRequest{},
	"POST /v1/work/{id}/wake":          api.WakeRequest{},
	"POST /v1/events":                  api.EmitRequest{},
	"POST /v1/executions/{id}/cancel":  api.ControlRequest{},
	"POST /v1/config/validate":         api.ValidateRequest{},
	"POST /v1/config/apply":            api.ApplyRequest{},
	"POST /v1/config/set":              api.SetRequest{},
	"POST /v1/actions/{name}":          api.ActRequest{},
	"POST /v1/packages/inspect":        api.InspectPackageRequest{},
	"POST /v1/packages":                api.InstallPackageRequest{},
	"POST /v1/packages/{name}/remove":  struct{}{},
}

// builtins is the input and result type of every builtin operation (nil:
// the input is the empty object).
var builtins = map[string][2]any{
	"emit":            {api.EmitInput{}, api.EmitResult{}},
	"create_work":     {api.CreateWorkInput{}, api.CreateWorkResult{}},
	"wait":            {api.WaitInput{}, api.DeclaredResult{}},
	"declare_outcome": {api.OutcomeInput{}, api.DeclaredResult{}},
	"read_context":    {nil, api.ReadContextResult{}},
}

// member is one member of a shorthand shape.
type member struct {
	name     string
	optional bool
	value    string
}

// parseShape reads a shorthand shape's members, at its top level.
func parseShape(s string) ([]member, error) {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "{") || !strings.HasSuffix(s, "}") {
		return nil, fmt.Errorf("shape %s is not an object", s)
	}
	body := strings.TrimSpace(s[1 : len(s)-1])
	var out []member
	for body != "" {
		if body[0] != '"' {
			return nil, fmt.Errorf("shape %s: a member name must be quoted at %q", s, body)
		}
		end := strings.IndexByte(body[1:], '"')
		if end < 0 {
			return nil, fmt.Errorf("shape %s: unterminated name", s)
		}
		m := member{name: body[1 : end+1]}
		body = strings.TrimSpace(body[end+2:])
		if strings.HasPrefix(body, "?") {
			m.optional, body = true, strings.TrimSpace(body[1:])
		}
		if strings.HasPrefix(body, ":") {
			v, rest, err := skipValue(strings.TrimSpace(body[1:]))
			if err != nil {
				return nil, fmt.Errorf("shape %s: %w", s, err)
			}
			m.value, body = v, rest
		}
		out = append(out, m)
		if body == "" {
			break
		}
		if body[0] != ',' {
			return nil, fmt.Errorf("shape %s: expected a comma at %q", s, body)
		}
		body = strings.TrimSpace(body[1:])
	}
	return out, nil
}

// skipValue splits an illustrated value off at the next top-level comma.
func skipValue(s string) (value, rest string, err error) {
	depth, quoted := 0, false
	for i, r := range s {
		switch {
		case quoted:
			quoted = r != '"'
		case r == '"':
			quoted = true
		case r == '{' || r == '[':
			depth++
		case r == '}' || r == ']':
			depth--
		case r == ',' && depth == 0:
			return strings.TrimSpace(s[:i]), strings.TrimSpace(s[i:]), nil
		}
	}
	if depth != 0 || quoted {
		return "", "", fmt.Errorf("unbalanced value %s", s)
	}
	return strings.TrimSpace(s), "", nil
}

// checkShape holds a shorthand to t: nothing t lacks, everything t
// always sends; an illustrated nested shape is held to its member's type.
func checkShape(shape string, t reflect.Type) error {
	members, err := parseShape(shape)
	if err != nil {
		return err
	}
	listed := map[string]bool{}
	for _, m := range members {
		listed[m.name] = true
		f, ok := fieldByJSONName(t, m.name)
		if !ok {
			return fmt.Errorf("%s documents member %q, which %s does not have", shape, m.name, t)
		}
		if strings.HasPrefix(m.value, `{"`) {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if err := checkShape(m.value, ft); err != nil {
				return err
			}
		}
	}
	for i := range t.NumField() {
		name, opts, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "-" || strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero") {
			continue
		}
		if !listed[name] {
			return fmt.Errorf("%s leaves out member %q, which %s always has", shape, name, t)
		}
	}
	return nil
}

var (
	tableRow  = regexp.MustCompile("^\\|(.*)\\|$")
	codeSpan  = regexp.MustCompile("`([^`]*)`")
	typeNamed = regexp.MustCompile("^(?:Page<([A-Z][A-Za-z]*)>|([A-Z][A-Za-z]*))$")
)

func tableRows(t *testing.T, path, header string) [][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]string
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, header):
			in = true
		case in && strings.HasPrefix(line, "|---"):
		case in && tableRow.MatchString(line):
			cells := strings.Split(tableRow.FindStringSubmatch(line)[1], " | ")
			for i := range cells {
				cells[i] = strings.TrimSpace(cells[i])
			}
			rows = append(rows, cells)
		case in:
			return rows
		}
	}
	return rows
}

func firstShape(cell string) string {
	for _, m := range codeSpan.FindAllStringSubmatch(cell, -1) {
		if strings.HasPrefix(m[1], "{") {
			return m[1]
		}
	}
	return ""
}

func TestDocumentedRouteShapesMatchTheWireTypes(t *testing.T) {
	rows := tableRows(t, "../docs/api.md", "| method | path |")
	if len(rows) < 30 {
		t.Fatalf("the route table has %d rows; the test reads the wrong table", len(rows))
	}
	for _, r := range rows {
		if len(r) != 6 {
			t.Errorf("route row %v does not have six cells", r)
			continue
		}
		route := r[0] + " " + strings.Trim(r[1], "`")
		if shape := firstShape(r[4]); shape != "" {
			v, ok := routeRequests[route]
			if !ok || v == nil {
				t.Errorf("route %s documents request %s, and the test knows no type for it", route, shape)
			} else if err := checkShape(shape, reflect.TypeOf(v)); err != nil {
				t.Errorf("route %s: %v", route, err)
			}
		}
		for _, m := range codeSpan.FindAllStringSubmatch(r[5], -1) {
			tm := typeNamed.FindStringSubmatch(m[1])
			if tm == nil {
				continue
			}
			name := tm[1] + tm[2]
			if _, ok := docTypes[name]; !ok {
				t.Errorf("route %s answers %s, and package api has no type %s", route, m[1], name)
			}
		}
	}
}

func TestDocumentedBuiltinShapesMatchTheWireTypes(t *testing.T) {
	rows := tableRows(t, "../docs/toolbelt.md", "| operation | input | result |")
	seen := map[string]bool{}
	for _, r := range rows {
		if len(r) != 3 {
			t.Errorf("builtin row %v does not have three cells", r)
			continue
		}
		op := strings.Trim(r[0], "`")
		types, ok := builtins[op]
		if !ok {
			t.Errorf("builtin %s: the test knows no types for it", op)
			continue
		}
		seen[op] = true
		for i, cell := range r[1:] {
			shape := firstShape(cell)
			switch {
			case shape == "":
				t.Errorf("builtin %s gives no shape in %q", op, cell)
			case types[i] == nil:
				if shape != "{}" {
					t.Errorf("builtin %s takes the empty object, the doc says %s", op, shape)
				}
			default:
				if err := checkShape(shape, reflect.TypeOf(types[i])); err != nil {
					t.Errorf("builtin %s: %v", op, err)
				}
			}
		}
	}
	for op := range builtins {
		if !seen[op] {
			t.Errorf("builtin %s is not in the table", op)
		}
	}
}

// The shorthand check fails on a member the type lacks, and on one it
// always has that the shape leaves out (the drift of create_work's
// result once documented as {"work_id"}).
func TestDocumentedShapeCheckRefuses(t *testing.T) {
	for _, c := range []struct {
		shape string
		v     any
	}{
		{`{"work_id"}`, api.CreateWorkResult{}},
		{`{"name","role"?,"owner"?}`, api.IssueRequest{}},
		{`{"binding"?, "input"?: {"type", "dta"?}}`, api.CreateWorkInput{}},
		{`{"name"`, api.IssueRequest{}},
	} {
		if err := checkShape(c.shape, reflect.TypeOf(c.v)); err == nil {
			t.Errorf("%s passed as %T; it must fail", c.shape, c.v)
		}
	}
	if err := checkShape(`{"outcome": "succeeded" \| "failed", "message"?, "data"?}`, reflect.TypeOf(api.OutcomeInput{})); err != nil {
		t.Errorf("an illustrated value: %v", err)
	}
}
