package config

import (
	"runtime"
	"strings"
	"testing"
)

// A document nested deeper than MaxDepth is refused with one too_deep
// diagnostic whose pointer stops at the bound, and reading it costs memory
// linear in its size: a 60 KB document nested 9,999 deep once cost about
// 1 GB, each node's diagnostic pointer being as long as its depth.
func TestNestingDepthIsBounded(t *testing.T) {
	reg := testRegistry(t)
	// Each level holds a null, which is reported where it is: without the
	// bound, every one of 9,999 diagnostics carried a pointer as long as
	// its depth.
	deep := `{"version": 1, "x": ` + strings.Repeat("[null,", 9999) + strings.Repeat("]", 9999) + `}`
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, res := Validate([]byte(deep), reg)
	runtime.ReadMemStats(&after)
	var tooDeep []Diagnostic
	for _, d := range res.Diagnostics {
		if d.Code == CodeTooDeep {
			tooDeep = append(tooDeep, d)
		}
	}
	if len(tooDeep) != 1 || len(res.Diagnostics) > MaxDepth+1 {
		t.Fatalf("%d diagnostics, %d too_deep; want one too_deep and at most a null per level above it", len(res.Diagnostics), len(tooDeep))
	}
	if p := tooDeep[0].Pointer; strings.Count(p, "/") != MaxDepth {
		t.Errorf("pointer %q has %d steps, want the %d of the bound", p, strings.Count(p, "/"), MaxDepth)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 8<<20 {
		t.Errorf("validating a %d-byte document allocated %d bytes, want it linear in the document (under 8 MiB)", len(deep), got)
	}

	// Up to the bound is read as usual: the deep value is only an
	// unknown member, one diagnostic at its place.
	ok := `{"version": 1, "x": ` + strings.Repeat("[", MaxDepth-1) + strings.Repeat("]", MaxDepth-1) + `}`
	_, res = Validate([]byte(ok), reg)
	if len(res.Diagnostics) != 1 || res.Diagnostics[0].Code != CodeUnknownField || res.Diagnostics[0].Pointer != "/x" {
		t.Fatalf("at the bound: %v, want one unknown_field at /x", res.Diagnostics)
	}
	// Objects count as arrays do.
	objs := `{"version": 1, "x": ` + strings.Repeat(`{"a": `, MaxDepth) + "1" + strings.Repeat("}", MaxDepth) + `}`
	if _, res = Validate([]byte(objs), reg); len(res.Diagnostics) != 1 || res.Diagnostics[0].Code != CodeTooDeep {
		t.Fatalf("deep objects: %v, want one too_deep", res.Diagnostics)
	}
}
