package packages

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/extension"
)

var installTime = time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)

func installGood(t *testing.T) (*Store, string, Installed) {
	t.Helper()
	src := writePackage(t, goodManifest, goodFiles)
	c := Check(src, CheckOptions{})
	if !c.Valid() {
		t.Fatal(c.Diagnostics)
	}
	digest, err := Digest(src)
	if err != nil {
		t.Fatal(err)
	}
	s := NewStore(t.TempDir(), func() time.Time { return installTime })
	inst, rec, err := s.Install(src, c.Manifest, digest, []string{PermissionOperationGate})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Digest != digest || !rec.InstalledAt.Equal(installTime) || rec.Version != "1.2.0" || rec.Kind != KindProtocol {
		t.Fatalf("record %+v", rec)
	}
	return s, src, inst
}

func TestDigestCoversPathsModesAndContents(t *testing.T) {
	base := writePackage(t, goodManifest, goodFiles)
	want, err := Digest(base)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(want, "sha256:") || len(want) != len("sha256:")+64 {
		t.Fatalf("digest %q", want)
	}
	same := writePackage(t, goodManifest, goodFiles)
	if got, _ := Digest(same); got != want {
		t.Fatal("the same tree in another directory has another digest")
	}
	changes := map[string]func(dir string) error{
		"contents": func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "server"), []byte("#!/bin/sh\nexit 1\n"), 0o755)
		},
		"mode":    func(dir string) error { return os.Chmod(filepath.Join(dir, "server"), 0o644) },
		"added":   func(dir string) error { return os.WriteFile(filepath.Join(dir, "extra"), nil, 0o644) },
		"removed": func(dir string) error { return os.Remove(filepath.Join(dir, "playbooks", "deploying.md")) },
		"renamed": func(dir string) error {
			return os.Rename(filepath.Join(dir, "playbooks", "deploying.md"), filepath.Join(dir, "playbooks", "other.md"))
		},
		"empty directory": func(dir string) error { return os.Mkdir(filepath.Join(dir, "new"), 0o755) },
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			dir := writePackage(t, goodManifest, goodFiles)
			if err := change(dir); err != nil {
				t.Fatal(err)
			}
			got, err := Digest(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got == want {
				t.Fatal("the change did not change the digest")
			}
		})
	}
	// A read-only mode change that keeps the execute bit is the same
	// stored mode.
	if err := os.Chmod(filepath.Join(same, "server"), 0o700); err != nil {
		t.Fatal(err)
	}
	if got, _ := Digest(same); got != want {
		t.Fatal("a mode the store keeps the same changed the digest")
	}
}

func TestDigestRefusesSymlinks(t *testing.T) {
	dir := writePackage(t, goodManifest, goodFiles)
	if err := os.Symlink("/etc/hostname", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := Digest(dir); !errors.Is(err, extension.ErrInvalid) {
		t.Fatalf("err %v", err)
	}
}

func TestInstallCopiesOwnerOnlyAndLoads(t *testing.T) {
	s, _, inst := installGood(t)
	if inst.Dir != filepath.Join(s.Dir, "deploy", FilesDir) {
		t.Fatalf("dir %s", inst.Dir)
	}
	for name, want := range map[string]os.FileMode{"server": 0o700, "playbooks/deploying.md": 0o600, ManifestFile: 0o600, "playbooks": 0o700, ".": 0o700} {
		st, err := os.Stat(filepath.Join(inst.Dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s has mode %o, want %o", name, st.Mode().Perm(), want)
		}
	}
	st, err := os.Stat(filepath.Join(s.Dir, "deploy", RecordFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("record: %v %v", st, err)
	}
	got, c, rec, err := s.Load("deploy", CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest != inst.Digest || len(c.Playbooks) != 1 || rec.Accepted[0] != PermissionOperationGate || got.Accepted[0] != PermissionOperationGate {
		t.Fatalf("loaded %+v %+v", got, rec)
	}
	names, err := s.Names()
	if err != nil || len(names) != 1 || names[0] != "deploy" {
		t.Fatalf("names %v %v", names, err)
	}
}

func TestInstallRefusesFilesChangedSinceShown(t *testing.T) {
	src := writePackage(t, goodManifest, goodFiles)
	shown, _ := Digest(src)
	if err := os.WriteFile(filepath.Join(src, "server"), []byte("#!/bin/sh\necho changed\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := NewStore(t.TempDir(), time.Now)
	c := Check(src, CheckOptions{})
	if _, _, err := s.Install(src, c.Manifest, shown, nil); !errors.Is(err, extension.ErrConflict) {
		t.Fatalf("err %v", err)
	}
	if names, _ := s.Names(); len(names) != 0 {
		t.Fatalf("installed %v", names)
	}
	ents, _ := os.ReadDir(s.Dir)
	if len(ents) != 0 {
		t.Fatalf("left %v behind", ents)
	}
}

func TestTamperedPackageIsRefusedUntilReinstalled(t *testing.T) {
	tampers := map[string]func(dir string) error{
		"changed": func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "playbooks", "deploying.md"), []byte(goodPlaybook+"more\n"), 0o600)
		},
		"added":   func(dir string) error { return os.WriteFile(filepath.Join(dir, "new"), []byte("x"), 0o600) },
		"removed": func(dir string) error { return os.Remove(filepath.Join(dir, "server")) },
		"mode":    func(dir string) error { return os.Chmod(filepath.Join(dir, "playbooks", "deploying.md"), 0o644) },
	}
	for name, tamper := range tampers {
		t.Run(name, func(t *testing.T) {
			s, src, inst := installGood(t)
			if err := s.Verify("deploy"); err != nil {
				t.Fatal(err)
			}
			if err := tamper(inst.Dir); err != nil {
				t.Fatal(err)
			}
			var ce *ChangedError
			if err := s.Verify("deploy"); !errors.As(err, &ce) || ce.Name != "deploy" {
				t.Fatalf("verify: %v", err)
			}
			_, _, _, err := s.Load("deploy", CheckOptions{})
			if !errors.As(err, &ce) {
				t.Fatalf("load: %v", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, "deploy") || !strings.Contains(msg, "open-conduit packages install") || strings.Contains(msg, "more") {
				t.Fatalf("message %q", msg)
			}
			// Reinstalling fixes it.
			digest, _ := Digest(src)
			c := Check(src, CheckOptions{})
			if _, _, err := s.Install(src, c.Manifest, digest, nil); err != nil {
				t.Fatal(err)
			}
			if err := s.Verify("deploy"); err != nil {
				t.Fatalf("after reinstall: %v", err)
			}
		})
	}
}

func TestReinstallReplacesAndRemoveDeletes(t *testing.T) {
	s, _, _ := installGood(t)
	newer := writePackage(t, strings.Replace(goodManifest, `"1.2.0"`, `"1.3.0"`, 1), goodFiles)
	c := Check(newer, CheckOptions{})
	digest, _ := Digest(newer)
	if _, _, err := s.Install(newer, c.Manifest, digest, nil); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Record("deploy")
	if err != nil || rec.Version != "1.3.0" || rec.Digest != digest {
		t.Fatalf("record %+v %v", rec, err)
	}
	if err := s.Remove("deploy"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Record("deploy"); !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("after remove: %v", err)
	}
	if err := s.Remove("deploy"); !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("second remove: %v", err)
	}
	ents, _ := os.ReadDir(s.Dir)
	if len(ents) != 0 {
		t.Fatalf("left %v behind", ents)
	}
}

func TestSweepClearsWhatAnInterruptedInstallLeft(t *testing.T) {
	s, _, _ := installGood(t)
	for _, d := range []string{".install-deploy-123", ".remove-deploy-x"} {
		if err := os.MkdirAll(filepath.Join(s.Dir, d, "files"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Sweep(); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(s.Dir)
	if len(ents) != 1 || ents[0].Name() != "deploy" {
		t.Fatalf("left %v", ents)
	}
	if err := s.Verify("deploy"); err != nil {
		t.Fatal(err)
	}
}
