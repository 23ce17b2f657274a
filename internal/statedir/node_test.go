package statedir

import (
	"os"
	"strings"
	"testing"
)

func TestNodeIDIsMadeOnceAndKept(t *testing.T) {
	dir := t.TempDir()
	n := 0
	fresh := func() string { n++; return "nod_" + strings.Repeat("a", n) }
	first, err := NodeID(dir, fresh)
	if err != nil {
		t.Fatal(err)
	}
	again, err := NodeID(dir, fresh)
	if err != nil {
		t.Fatal(err)
	}
	if first != "nod_a" || again != first {
		t.Fatalf("node ids = %q then %q, want nod_a twice", first, again)
	}
	fi, err := os.Stat(NodePath(dir))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("node id file mode = %04o, want 0600", fi.Mode().Perm())
	}
}

func TestNodeIDRefusesAFileThatIsNoNodeID(t *testing.T) {
	for name, content := range map[string]string{"empty": "", "spaces": "nod a\n", "long": strings.Repeat("n", 65)} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(NodePath(dir), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			id, err := NodeID(dir, func() string { return "nod_new" })
			if err == nil {
				t.Fatalf("NodeID = %q, want a refusal", id)
			}
			if content != "" && strings.Contains(err.Error(), strings.TrimSpace(content)) {
				t.Errorf("the refusal repeats the file's content: %v", err)
			}
		})
	}
}
