package config

import (
	"slices"
	"strings"
	"testing"
)

// The top-level ingress member: the webhook listener's address, checked
// strictly, loopback unless allowed, and warned about beyond it.
func TestIngressListener(t *testing.T) {
	for name, tc := range map[string]struct {
		doc      string
		want     []string // pointer code
		listen   string
		warnings []string
	}{
		"absent":             {doc: `{"version": 1}`},
		"loopback":           {doc: `{"version": 1, "ingress": {"listen": "127.0.0.1:9000"}}`, listen: "127.0.0.1:9000"},
		"localhost and ipv6": {doc: `{"version": 1, "ingress": {"listen": "[::1]:0"}}`, listen: "[::1]:0"},
		"not host:port":      {doc: `{"version": 1, "ingress": {"listen": "example.com:80"}}`, want: []string{"/ingress/listen invalid_value"}},
		"a bad port":         {doc: `{"version": 1, "ingress": {"listen": "127.0.0.1:70000"}}`, want: []string{"/ingress/listen invalid_value"}},
		"beyond loopback":    {doc: `{"version": 1, "ingress": {"listen": "0.0.0.0:8787"}}`, want: []string{"/ingress/listen invalid_value"}},
		"beyond loopback, allowed": {doc: `{"version": 1, "ingress": {"listen": "0.0.0.0:8787", "allow_non_loopback": true}}`, listen: "0.0.0.0:8787",
			warnings: []string{"/ingress/listen ingress_not_loopback"}},
		"an unknown member": {doc: `{"version": 1, "ingress": {"port": 1}}`, want: []string{"/ingress/port unknown_field"}},
		"wrong types":       {doc: `{"version": 1, "ingress": {"listen": 8787, "allow_non_loopback": "yes"}}`, want: []string{"/ingress/allow_non_loopback wrong_type", "/ingress/listen wrong_type"}},
		"not an object":     {doc: `{"version": 1, "ingress": "127.0.0.1:8787"}`, want: []string{"/ingress wrong_type"}},
	} {
		t.Run(name, func(t *testing.T) {
			snap, res := Validate([]byte(tc.doc), testRegistry(t))
			var got []string
			for _, d := range res.Diagnostics {
				got = append(got, d.Pointer+" "+string(d.Code))
				if strings.Contains(d.Remedy, "0.0.0.0") || strings.Contains(d.Remedy, "example.com") || strings.Contains(d.Remedy, "70000") {
					t.Errorf("the remedy quotes the value: %s", d.Remedy)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("diagnostics %q, want %q", got, tc.want)
			}
			if len(tc.want) > 0 {
				return
			}
			if snap.Ingress().Listen != tc.listen {
				t.Fatalf("listen %q, want %q", snap.Ingress().Listen, tc.listen)
			}
			var warned []string
			for _, w := range res.Warnings {
				warned = append(warned, w.Pointer+" "+w.Code)
			}
			if !slices.Equal(warned, tc.warnings) {
				t.Fatalf("warnings %q, want %q", warned, tc.warnings)
			}
		})
	}
}
