package shell

import (
	"encoding/json"
	"testing"
)

// Only a sandboxed command needs its endpoint when its binding grants no
// operation (its egress proxy is reached through the run directory); a
// config that does not parse keeps it.
func TestNeedsEndpoint(t *testing.T) {
	b := setup(t)
	for config, want := range map[string]bool{
		`{"command": ["true"]}`:                                false,
		`{"command": ["true"], "sandbox": {"enabled": false}}`: false,
		`{"command": ["true"], "sandbox": {"enabled": true}}`:  true,
		`{"command": "true"}`:                                  true,
	} {
		if got := b.exec.NeedsEndpoint(json.RawMessage(config)); got != want {
			t.Errorf("NeedsEndpoint(%s) = %v, want %v", config, got, want)
		}
	}
}
