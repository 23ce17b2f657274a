package config

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// The redacted form of a secret reference, <scheme>:<redacted>, is what
// GET /v1/config and `open-conduit config get` show. A document read back
// from them (config get > f, edit, config apply f) holds it where the
// active document holds the reference itself; KeepRedacted puts the
// references back, and Validate refuses a redacted form it left.

// IsRedactedReference reports whether s is the redacted form of a secret
// reference rather than a reference.
func IsRedactedReference(s string) bool {
	scheme, rest, ok := strings.Cut(s, ":")
	if !ok || rest != redactedMark {
		return false
	}
	switch Scheme(scheme) {
	case SchemeKeyring, SchemeFile, SchemeEnv, SchemeCmd:
		return true
	}
	return false
}

// KeepRedacted returns doc with each secret whose value is the redacted
// form <scheme>:<redacted> given the reference active (the document as
// written of the active configuration) has for that secret, when active
// has one of the same scheme. Every other member keeps its text; a doc
// without a redacted form is returned as it is. It never reports a
// reference: a redacted form it cannot fill is left for Validate to refuse.
func KeepRedacted(doc, active []byte) []byte {
	mine := topSecrets(doc)
	if len(mine) == 0 {
		return doc
	}
	theirs := topSecrets(active)
	out := doc
	for name, v := range mine {
		var text string
		if json.Unmarshal(v, &text) != nil || !IsRedactedReference(text) {
			continue
		}
		var ref string
		if json.Unmarshal(theirs[name], &ref) != nil {
			continue
		}
		parsed, err := ParseSecretRef(ref)
		if err != nil || parsed.String() != text {
			continue
		}
		quoted, err := json.Marshal(ref)
		if err != nil {
			continue
		}
		changed, err := SetMember(out, "/secrets/"+escapePointerToken(name), quoted)
		if err != nil {
			continue
		}
		out = changed
	}
	return out
}

// topSecrets is the members of a document's top-level "secrets" object;
// nil when it has none or is not JSON.
func topSecrets(doc []byte) map[string]jsontext.Value {
	var top map[string]jsontext.Value
	if json.Unmarshal(bytes.TrimSpace(doc), &top) != nil {
		return nil
	}
	var secrets map[string]jsontext.Value
	if json.Unmarshal(top["secrets"], &secrets) != nil {
		return nil
	}
	return secrets
}

func escapePointerToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// Normalize returns a document's normalized form without judging its
// meaning: what Snapshot.Normalized holds for it when it is valid
// (canonical JSON, each secret reference redacted). ok is false when the
// document does not parse; Validate says why.
func Normalize(data []byte) (normalized json.RawMessage, ok bool) {
	var is issues
	d := parseDocument(data, &is)
	if d.root == nil || d.stop {
		return nil, false
	}
	out, err := d.root.canonical(d.redactSecrets)
	if err != nil {
		return nil, false
	}
	return out, true
}
