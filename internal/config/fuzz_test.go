package config

import (
	"bytes"
	"io"
	"reflect"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// strictShape mirrors the version 1 schema for a second, independent strict
// decode: go-json-experiment refuses duplicate names, invalid UTF-8 and,
// with RejectUnknownMembers, unknown members.
type strictShape struct {
	Version int `json:"version"`
	Limits  struct {
		CausalMaxDepth  int    `json:"causal_max_depth"`
		CausalPerMinute int    `json:"causal_per_minute"`
		MaxRunning      int    `json:"max_running"`
		AttemptTimeout  string `json:"attempt_timeout"`
		Lease           string `json:"lease"`
	} `json:"limits"`
	Secrets    map[string]string `json:"secrets"`
	Extensions map[string]struct {
		Enabled bool     `json:"enabled"`
		Scopes  []string `json:"scopes"`
	} `json:"extensions"`
	Scopes map[string]struct {
		Parent        string `json:"parent"`
		Enabled       bool   `json:"enabled"`
		Removed       bool   `json:"removed"`
		Authorization struct {
			Operations []string `json:"operations"`
			Reads      []string `json:"reads"`
			Emit       []string `json:"emit"`
		} `json:"authorization"`
		Bindings map[string]struct {
			Executor   string                    `json:"executor"`
			Config     map[string]jsontext.Value `json:"config"`
			Operations []string                  `json:"operations"`
			Secrets    map[string]string         `json:"secrets"`
			Grants     map[string]struct {
				Operations []string `json:"operations"`
			} `json:"grants"`
			Requires []string `json:"requires"`
			Playbook string   `json:"playbook"`
		} `json:"bindings"`
		Routes []struct {
			ID    string `json:"id"`
			Match struct {
				Type   string `json:"type"`
				Source string `json:"source"`
			} `json:"match"`
			Binding string `json:"binding"`
			Effect  string `json:"effect"`
			Samples map[string]struct {
				Type           string         `json:"type"`
				Source         string         `json:"source"`
				CorrelationKey string         `json:"correlation_key"`
				Data           map[string]any `json:"data"`
			} `json:"samples"`
		} `json:"routes"`
	} `json:"scopes"`
}

// hasNull reports whether a syntactically valid document holds a null.
func hasNull(t *testing.T, data []byte) bool {
	dec := jsontext.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := dec.ReadToken()
		if err == io.EOF {
			return false
		}
		if err != nil {
			t.Fatalf("an accepted document does not tokenize: %v", err)
		}
		if tok.Kind() == 'n' {
			return true
		}
	}
}

// FuzzParse feeds the strict parser and the validator arbitrary bytes,
// seeded with every table case. It must never panic, must answer the same
// twice, and must never accept what the strict rules refuse: whatever
// ParseBytes accepts is at most 1 MiB, one JSON object with no null, and
// decodes under go-json-experiment's strict rules (no duplicate name,
// invalid UTF-8 or unknown member) into the schema's shape.
func FuzzParse(f *testing.F) {
	f.Add([]byte(baseConfig))
	for _, c := range ruleCases() {
		d := decode(f, baseConfig)
		c.mut(f, d)
		f.Add(encode(f, d))
	}
	for _, c := range rawCases() {
		if len(c.text) < 4096 {
			f.Add([]byte(c.text))
		}
	}
	f.Add(encode(f, severalErrors(f)))
	reg := testRegistry(f)

	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, perr := ParseBytes(data)
		snap, res := Validate(data, reg)
		_, res2 := Validate(data, reg)
		if !reflect.DeepEqual(res, res2) {
			t.Fatalf("two validations differ:\n%v\n%v", res, res2)
		}
		if (snap != nil) != res.Valid() {
			t.Fatal("snapshot and validity disagree")
		}
		if perr != nil && res.Valid() {
			t.Fatalf("Validate accepted what ParseBytes refused: %v", perr)
		}
		if perr != nil {
			if cfg != nil {
				t.Fatal("ParseBytes returned a config with its error")
			}
			return
		}
		if len(data) > MaxSize {
			t.Fatalf("accepted %d bytes", len(data))
		}
		var shape strictShape
		if err := json.Unmarshal(data, &shape, json.RejectUnknownMembers(true)); err != nil {
			t.Fatalf("accepted a document the strict decoder refuses: %v", err)
		}
		if hasNull(t, data) {
			t.Fatal("accepted a null")
		}
		if jsontext.Value(data).Kind() != '{' {
			t.Fatal("accepted a document that is not an object")
		}
		if shape.Version != Version || cfg.Version != Version {
			t.Fatalf("accepted version %d", shape.Version)
		}
		if snap != nil && len(snap.Hash) != 64 {
			t.Fatal("a snapshot without a hash")
		}
	})
}
