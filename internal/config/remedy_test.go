package config

import (
	"regexp"
	"strings"
	"testing"
)

// doubled finds two articles side by side ("the a"), or two indefinite
// ones a word apart ("a scope an id"): the trace of a remedy glued from a
// prefix and a sentence that already starts with its own article.
var doubled = regexp.MustCompile(`(?i)\b((a|an|the) (a|an|the)|(a|an) \w+ (a|an)) `)

// Every remedy the rule and raw-text tables provoke reads as one plain
// sentence: no doubled article, and it does not name its own place, which
// the diagnostic's pointer already gives.
func TestRemediesReadAsOneSentence(t *testing.T) {
	reg := testRegistry(t)
	var diags []Diagnostic
	for _, tc := range ruleCases() {
		d := decode(t, baseConfig)
		tc.mut(t, d)
		_, res := Validate(encode(t, d), reg)
		diags = append(diags, res.Diagnostics...)
	}
	for _, tc := range rawCases() {
		_, res := Validate([]byte(tc.text), reg)
		diags = append(diags, res.Diagnostics...)
	}
	if len(diags) < 50 {
		t.Fatalf("the tables provoked only %d diagnostics", len(diags))
	}
	for _, d := range diags {
		if m := doubled.FindString(d.Remedy); m != "" {
			t.Errorf("%s %s: remedy %q doubles an article (%q)", d.Pointer, d.Code, d.Remedy, m)
		}
		if len(d.Pointer) > 1 && strings.Contains(d.Remedy, d.Pointer) {
			t.Errorf("%s %s: remedy %q names its own place", d.Pointer, d.Code, d.Remedy)
		}
	}
}

// The check itself refuses the remedy it was written against.
func TestDoubledArticleCheckFails(t *testing.T) {
	for _, bad := range []string{"a scope an id is a lower-case letter", "The the value", "an a name"} {
		if doubled.FindString(bad) == "" {
			t.Errorf("%q passed the check", bad)
		}
	}
	for _, good := range []string{"a scope id is a lower-case letter followed by up to 62 lower-case letters", "name a scope or a binding", "make one scope of the cycle a root"} {
		if m := doubled.FindString(good); m != "" {
			t.Errorf("%q refused for %q", good, m)
		}
	}
}
