package config

import (
	"slices"
	"strings"
	"testing"
)

func TestParseEgressEntry(t *testing.T) {
	good := map[string]string{
		"api.anthropic.com:443": "api.anthropic.com:443",
		"127.0.0.1:8080":        "127.0.0.1:8080",
		"[::1]:3128":            "[::1]:3128",
		"*.example.com:443":     "*.example.com:443",
		"localhost:1":           "localhost:1",
		"a-b.c9.d:65535":        "a-b.c9.d:65535",
	}
	for in, norm := range good {
		e, ok := ParseEgressEntry(in)
		if !ok || e.String() != norm {
			t.Errorf("ParseEgressEntry(%q) = %+v, %v; want %s", in, e, ok, norm)
		}
	}
	for _, in := range []string{
		"", "api.example.com", ":443", "api.example.com:", "api.example.com:0", "api.example.com:65536",
		"api.example.com:-1", "api.example.com:08", "API.example.com:443", "https://api.example.com:443",
		"api.example.com:443/path", "*:443", "*.com:443", "*.*.example.com:443", "::1:443", "[127.0.0.1]:80",
		"127.000.0.1:80", "-a.example.com:443", "a_b.example.com:443", "api.example.com:1-100", "[fe80::1%eth0]:80",
		"a..b:80", "example.com.:443", " example.com:443",
	} {
		if e, ok := ParseEgressEntry(in); ok {
			t.Errorf("ParseEgressEntry(%q) accepted %+v", in, e)
		}
	}
}

func TestEgressEntryAllows(t *testing.T) {
	e := func(s string) EgressEntry {
		x, ok := ParseEgressEntry(s)
		if !ok {
			t.Fatalf("%s does not parse", s)
		}
		return x
	}
	cases := []struct {
		entry, host string
		port        int
		want        bool
	}{
		{"api.example.com:443", "api.example.com", 443, true},
		{"api.example.com:443", "API.Example.com", 443, true},
		{"api.example.com:443", "api.example.com", 80, false},
		{"api.example.com:443", "x.api.example.com", 443, false},
		{"*.example.com:443", "a.example.com", 443, true},
		{"*.example.com:443", "a.b.example.com", 443, true},
		{"*.example.com:443", "example.com", 443, false},
		{"*.example.com:443", "evilexample.com", 443, false},
		{"*.example.com:443", "a.example.com", 444, false},
		{"127.0.0.1:8080", "127.0.0.1", 8080, true},
		{"127.0.0.1:8080", "::ffff:127.0.0.1", 8080, true},
		{"127.0.0.1:8080", "localhost", 8080, false},
		{"[::1]:80", "::1", 80, true},
		{"[::1]:80", "0:0:0:0:0:0:0:1", 80, true},
	}
	for _, c := range cases {
		if got := e(c.entry).Allows(c.host, c.port); got != c.want {
			t.Errorf("%s allows %s:%d = %v, want %v", c.entry, c.host, c.port, got, c.want)
		}
	}
}

// TestEgressValidation: the binding's egress and the scope's ceiling are
// checked at their pointers, never quoting the value, and a valid one
// reaches the snapshot's AllowEgress.
func TestEgressValidation(t *testing.T) {
	reg := testRegistry(t)
	run := func(t *testing.T, muts ...func(testing.TB, jdoc)) (*Snapshot, []want, []Diagnostic) {
		d := decode(t, baseConfig)
		for _, m := range muts {
			m(t, d)
		}
		snap, res := Validate(encode(t, d), reg)
		return snap, got(res.Diagnostics), res.Diagnostics
	}
	setTo := func(ptr string, v any) func(testing.TB, jdoc) {
		return func(t testing.TB, d jdoc) { set(t, d, ptr, v) }
	}
	const secretish = "sekrit-host-name.example.com:443x"
	cases := []struct {
		name string
		muts []func(testing.TB, jdoc)
		want []want
	}{
		{"binding egress not an array", []func(testing.TB, jdoc){setTo(agent+"/egress", "api.example.com:443")}, one(agent+"/egress", CodeWrongType)},
		{"binding egress entry a number", []func(testing.TB, jdoc){setTo(agent+"/egress", raw(`["api.example.com:443", 443]`))}, one(agent+"/egress/1", CodeWrongType)},
		{"binding egress entry malformed", []func(testing.TB, jdoc){setTo(agent+"/egress", raw(`["api.example.com:443", "`+secretish+`"]`))}, one(agent+"/egress/1", CodeInvalidValue)},
		{"scope egress malformed", []func(testing.TB, jdoc){setTo("/scopes/ops/authorization/egress", raw(`["*:443"]`))}, one("/scopes/ops/authorization/egress/0", CodeInvalidValue)},
		{"binding egress outside the scope's ceiling", []func(testing.TB, jdoc){
			setTo("/scopes/ops/authorization/egress", raw(`["*.example.com:443"]`)),
			setTo(agent+"/egress", raw(`["api.example.com:443", "api.example.com:80", "127.0.0.1:8080"]`)),
		}, []want{{agent + "/egress/1", CodeAuthorityWidening}, {agent + "/egress/2", CodeAuthorityWidening}}},
		{"binding egress outside an ancestor's ceiling", []func(testing.TB, jdoc){
			setTo("/scopes/root/authorization/egress", raw(`["api.example.com:443"]`)),
			setTo(agent+"/egress", raw(`["api.example.com:443", "other.example.com:443"]`)),
		}, one(agent+"/egress/1", CodeAuthorityWidening)},
		{"scope egress wider than its parent's", []func(testing.TB, jdoc){
			setTo("/scopes/root/authorization/egress", raw(`["*.example.com:443"]`)),
			setTo("/scopes/ops/authorization/egress", raw(`["a.example.com:443", "*.example.com:443", "example.com:443"]`)),
		}, one("/scopes/ops/authorization/egress/2", CodeAuthorityWidening)},
		{"valid", []func(testing.TB, jdoc){
			setTo("/scopes/root/authorization/egress", raw(`["*.example.com:443", "127.0.0.1:8080"]`)),
			setTo(agent+"/egress", raw(`["api.example.com:443", "127.0.0.1:8080", "127.0.0.1:8080"]`)),
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			snap, g, ds := run(t, tc.muts...)
			if !slices.Equal(g, orNone(tc.want)) {
				t.Fatalf("diagnostics:\n got  %v\n want %v", g, tc.want)
			}
			for _, d := range ds {
				if strings.Contains(d.Remedy, "sekrit") || strings.Contains(d.Remedy, "api.example.com:80") {
					t.Errorf("%s quotes the configured value: %s", d.Pointer, d.Remedy)
				}
			}
			if len(tc.want) > 0 {
				return
			}
			b, _ := snap.Binding("ops", "agent")
			if len(b.Egress) != 2 {
				t.Errorf("the binding's egress = %v, want its two entries once each", b.Egress)
			}
			for _, c := range []struct {
				host string
				port int
				want bool
			}{{"api.example.com", 443, true}, {"127.0.0.1", 8080, true}, {"127.0.0.1", 8081, false}, {"other.example.com", 443, false}} {
				if got := snap.AllowEgress("ops", "agent", c.host, c.port); got != c.want {
					t.Errorf("AllowEgress(%s:%d) = %v, want %v", c.host, c.port, got, c.want)
				}
			}
			if snap.AllowEgress("ops", "nobody", "api.example.com", 443) || snap.AllowEgress("nowhere", "agent", "api.example.com", 443) {
				t.Error("AllowEgress allowed a binding or scope that does not exist")
			}
			if got := snap.Config().Scopes["ops"].Bindings["agent"].Egress; !slices.Equal(got, []string{"api.example.com:443", "127.0.0.1:8080", "127.0.0.1:8080"}) {
				t.Errorf("the written egress = %v", got)
			}
		})
	}
	// A disabled scope allows nothing.
	snap, g, _ := run(t, setTo(agent+"/egress", raw(`["api.example.com:443"]`)), setTo("/scopes/ops/enabled", false))
	if len(g) != 0 || snap.AllowEgress("ops", "agent", "api.example.com", 443) {
		t.Errorf("a disabled scope: diagnostics %v, allowed %v", g, snap != nil && snap.AllowEgress("ops", "agent", "api.example.com", 443))
	}
}
