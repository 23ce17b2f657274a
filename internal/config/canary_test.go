package config

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// canary is planted in every kind of value and in ids that fail their
// rule. It passes no naming rule (upper case, '.', '-'), so no pointer may
// show it, and no remedy or error may echo it.
const canary = "Zq7.Canary-x"

func assertNoCanary(t *testing.T, where string, texts ...string) {
	t.Helper()
	for _, s := range texts {
		if strings.Contains(strings.ToLower(s), strings.ToLower("Zq7.Canary")) || strings.Contains(s, "Zq7") {
			t.Errorf("%s leaks the canary: %q", where, s)
		}
	}
}

func TestCanaryNeverInDiagnostics(t *testing.T) {
	c := canary
	docs := map[string]string{
		"values and failing ids": `{
  "version": 1,
  "limits": {"attempt_timeout": "` + c + `", "lease": "` + c + `"},
  "secrets": {
    "` + c + `": "env:TOKEN",
    "a": "vault:` + c + `",
    "b": "keyring:` + c + `",
    "d": "file:` + c + `/x",
    "e": "env:` + c + `",
    "f": "cmd:echo ` + c + "\\u0001" + `",
    "g": "` + c + `"
  },
  "extensions": {"` + c + `": {}, "introspection": {"scopes": ["` + c + `", "zq7canary-missing"]}},
  "scopes": {
    "` + c + `": {},
    "s": {
      "parent": "` + c + `",
      "` + c + `": true,
      "authorization": {"operations": ["` + c + `", "@` + c + `", "!` + c + `", "zq7.canary"], "reads": ["` + c + `"]},
      "bindings": {
        "` + c + `": {"executor": "shell"},
        "b": {
          "executor": "` + c + `",
          "config": {"command": ["` + c + `"], "` + c + `": null},
          "operations": ["` + c + `"],
          "secrets": {"` + c + `": "a", "OPEN_CONDUIT_X": "` + c + `", "TOKEN": "` + c + `"},
          "grants": {"` + c + `": {"operations": []}, "g": {"operations": ["` + c + `"], "` + c + `": 1}},
          "requires": ["` + c + `"],
          "playbook": "` + c + `"
        },
        "c": {"executor": "shell", "config": {"command": "` + c + `"}}
      },
      "routes": [
        {"id": "` + c + `", "match": {"type": "` + c + `", "source": "` + c + `"}, "binding": "` + c + `", "effect": "` + c + `"},
        "` + c + `"
      ]
    }
  }
}`,
		"duplicates, encodings and nulls": "{\"version\": 1, \"scopes\": {\"" + c + "\": {}, \"" + c + "\": {}, \"s\": {\"parent\": \"" + c + "\xff\", \"" + c + "\": null}}, \"" + c + "\": 1, \"" + c + "\": 2}",
		"syntax error after the canary":   `{"version": 1, "secrets": {"a": "` + c + `" ` + c + `}}`,
		"trailing data":                   `{"version": 1} "` + c + `"`,
		"version":                         `{"version": "` + c + `"}`,
		"version number":                  `{"version": 7, "` + c + `": 1}`,
	}
	reg := testRegistry(t)
	for name, text := range docs {
		t.Run(name, func(t *testing.T) {
			if !strings.Contains(text, c) {
				t.Fatal("the canary is not planted")
			}
			snap, res := Validate([]byte(text), reg)
			if snap != nil || res.Valid() {
				t.Fatal("a config full of mistakes is valid")
			}
			for _, d := range res.Diagnostics {
				assertNoCanary(t, "diagnostic", d.Pointer, d.Remedy, d.String())
			}
			assertNoCanary(t, "Result.Err", res.Err().Error())
			_, err := ParseBytes([]byte(text))
			if err == nil {
				t.Fatal("ParseBytes accepted it")
			}
			assertNoCanary(t, "ParseBytes error", err.Error())
		})
	}
	// The first document exercises many rules; make sure they ran.
	_, res := Validate([]byte(docs["values and failing ids"]), reg)
	codes := map[Code]int{}
	for _, d := range res.Diagnostics {
		codes[d.Code]++
	}
	for _, code := range []Code{CodeInvalidValue, CodeInvalidSecretReference, CodeUnknownField, CodeUnknownReference, CodeNullValue, CodeWrongType} {
		if codes[code] == 0 {
			t.Errorf("no %s diagnostic: the canary document does not reach that rule", code)
		}
	}
	if len(res.Diagnostics) < 30 {
		t.Errorf("only %d diagnostics: %v", len(res.Diagnostics), res.Diagnostics)
	}

	// ResolveOperations' error, too.
	_, err := ResolveOperations([]string{c, "@" + c, "!" + c, "zq7.canary"}, reg)
	if err == nil {
		t.Fatal("ResolveOperations accepted the canary")
	}
	assertNoCanary(t, "ResolveOperations error", err.Error())
}

// TestCanaryNeverInResolverErrors: neither a reference's text nor a secret
// nor a command's output reaches a resolver error.
func TestCanaryNeverInResolverErrors(t *testing.T) {
	state := t.TempDir()
	if err := os.WriteFile(filepath.Join(state, SecretsFileName), []byte(`{"k": "`+canary+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &Resolver{
		StateDir:  state,
		Keyring:   memKeyring{"svc/" + canary: ""},
		LookupEnv: func(string) (string, bool) { return "", false },
	}
	refs := []string{
		"vault:" + canary,
		"env:" + canary,
		"env:" + strings.ReplaceAll(canary, ".", "_"),
		"file:k",                // unsafe file holding the canary
		"file:" + canary,        // malformed key
		"keyring:svc/" + canary, // empty item
		"keyring:svc/" + canary + "-missing",
		"cmd:echo " + canary + "; exit 3",
		"cmd:echo " + canary + " >&2; exit 1",
		"cmd:yes " + canary + " | head -c 70000",
		"cmd:printf ''; : " + canary,
	}
	for _, ref := range refs {
		v, err := r.Resolve(context.Background(), ref)
		if err == nil {
			t.Errorf("resolved %q", v)
			continue
		}
		var se *SecretError
		if !errors.As(err, &se) || se.Code == "" {
			t.Errorf("not a SecretError with a code: %v", err)
		}
		assertNoCanary(t, "resolver error", err.Error())
	}
}

// memKeyring is the test keyring: "service/user" -> secret.
type memKeyring map[string]string

func (m memKeyring) Get(service, user string) (string, error) {
	v, ok := m[service+"/"+user]
	if !ok {
		return "", ErrKeyringNotFound
	}
	return v, nil
}
