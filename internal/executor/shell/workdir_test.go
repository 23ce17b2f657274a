package shell

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestWorkingDirectoryErrorNeverEchoesTheConfiguredDir: a binding's dir
// that cannot be created fails the attempt with a message that does not
// repeat the configured value (the scheduler records the error as the
// execution's and the Work's message).
func TestWorkingDirectoryErrorNeverEchoesTheConfiguredDir(t *testing.T) {
	b := setup(t)
	// One path component longer than any file system allows.
	const canary = "dir-canary-"
	dir := canary + strings.Repeat("x", 300)
	b.dir = filepath.Join(b.tmp, "exe-long")
	_, err := b.exec.Run(context.Background(), b.request(t, Config{Command: []string{"true"}, Dir: dir}))
	if err == nil {
		t.Fatal("a working directory that cannot be created was accepted")
	}
	if strings.Contains(err.Error(), canary) {
		t.Fatalf("the error echoes the configured dir: %v", err)
	}
}
