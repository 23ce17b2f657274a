// Package wiretest pins the JSON both sockets send: it fills records by
// reflection (so a field added to a record later is covered too) and
// holds each converted sample's body to a golden file in the test's
// testdata directory. Run a test with -update to rewrite its golden file
// after a deliberate change of the wire.
//
// It is a test helper: no production package may import it, and it must
// never hold a real token, digest or secret in a sample.
package wiretest

import (
	stdjson "encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the bodies the tests send")

// Marshal encodes v as the servers render a response body
// (go-json-experiment, Deterministic).
func Marshal(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v, json.Deterministic(true))
	if err != nil {
		t.Fatalf("marshal %T: %v", v, err)
	}
	return string(b)
}

// Time is the time Fill sets.
var Time = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)

// Fill sets every field of the value v points to: strings to their field's
// name, integers to 7, floats to 7.5, booleans to true, times to Time, raw JSON to an
// object, and two filled elements in every slice and one in every map.
func Fill(v any) {
	fillValue(reflect.ValueOf(v).Elem(), "x")
}

var (
	timeType = reflect.TypeFor[time.Time]()
	rawType  = reflect.TypeFor[stdjson.RawMessage]()
)

func fillValue(v reflect.Value, name string) {
	switch {
	case v.Type() == timeType:
		v.Set(reflect.ValueOf(Time))
		return
	case v.Type() == rawType:
		v.SetBytes([]byte(`{"k":[1,"two"]}`))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(name)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(7)
	case reflect.Float64:
		v.SetFloat(7.5)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fillValue(p.Elem(), name)
		v.Set(p)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes([]byte(name)) // a digest: never sent
			return
		}
		s := reflect.MakeSlice(v.Type(), 2, 2)
		fillValue(s.Index(0), name+"-0")
		fillValue(s.Index(1), name+"-1")
		v.Set(s)
	case reflect.Array:
		for i := range v.Len() {
			fillValue(v.Index(i), name)
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k := reflect.New(v.Type().Key()).Elem()
		fillValue(k, name+"-key")
		e := reflect.New(v.Type().Elem()).Elem()
		fillValue(e, name+"-value")
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillValue(v.Field(i), v.Type().Field(i).Name)
			}
		}
	default:
		panic(fmt.Sprintf("fill: no rule for %s", v.Type()))
	}
}

// Samples returns a filled record ("filled"), its zero value ("zero") and
// a filled one that empty changed ("emptied"; nil leaves it filled).
func Samples[T any](empty func(*T)) map[string]T {
	var full, zero, emptied T
	Fill(&full)
	Fill(&emptied)
	if empty != nil {
		empty(&emptied)
	}
	return map[string]T{"filled": full, "zero": zero, "emptied": emptied}
}

// Golden holds one test's bodies, by sample name, to
// testdata/<name>.golden, where name is the test's name without its Test
// and Wire prefixes, in lower case: one line per sample, "name<TAB>body",
// sorted by name.
type Golden struct {
	t   *testing.T
	got map[string]string
}

// NewGolden returns the test's golden; it is checked (or, with -update,
// written) when the test ends.
func NewGolden(t *testing.T) *Golden {
	g := &Golden{t: t, got: map[string]string{}}
	t.Cleanup(g.check)
	return g
}

// Add records the body v is sent as under name.
func (g *Golden) Add(name string, v any) {
	g.t.Helper()
	if strings.ContainsAny(name, "\t\n") {
		g.t.Fatalf("golden sample name %q holds a tab or a newline", name)
	}
	if _, dup := g.got[name]; dup {
		g.t.Fatalf("golden sample %q twice", name)
	}
	g.got[name] = Marshal(g.t, v)
}

func (g *Golden) check() {
	t := g.t
	base := strings.TrimPrefix(strings.TrimPrefix(t.Name(), "Test"), "Wire")
	path := filepath.Join("testdata", strings.ToLower(base)+".golden")
	names := slices.Sorted(maps.Keys(g.got))
	var b strings.Builder
	for _, n := range names {
		b.WriteString(n + "\t" + g.got[n] + "\n")
	}
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run '^%s$' -update to write it)", err, t.Name())
	}
	want := map[string]string{}
	for line := range strings.Lines(string(raw)) {
		n, body, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "\t")
		want[n] = body
	}
	for _, n := range names {
		if w, ok := want[n]; !ok {
			t.Errorf("%s: %s has no golden body", path, n)
		} else if w != g.got[n] {
			t.Errorf("%s: the wire of %s changed:\ngolden: %s\nnow:    %s", path, n, w, g.got[n])
		}
	}
	for _, n := range slices.Sorted(maps.Keys(want)) {
		if _, ok := g.got[n]; !ok {
			t.Errorf("%s: golden sample %s is no longer sent", path, n)
		}
	}
}
