package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/open-conduit/open-conduit/internal/atomicfile"
	"github.com/open-conduit/open-conduit/internal/config"
)

// SkillsDir is the directory, under the playbook directory, where the
// daemon writes every playbook as <name>/SKILL.md: the layout agent CLIs
// read skills from.
const SkillsDir = "skills"

// SkillFile is the name of a written playbook inside its skill directory.
const SkillFile = "SKILL.md"

// playbooks keeps <state>/playbooks: the operator's own playbooks are
// read from its <name>.md files into the registry, and every playbook the
// registry holds (the extensions' and the operator's) is written under
// skills/.
type playbooks struct {
	dir string
	reg *config.Registry
	log *slog.Logger

	mu sync.Mutex // one write at a time
}

// read gives the registry the operator's playbooks as the directory holds
// them now; a file left out is logged with why.
func (p *playbooks) read() {
	pbs, problems := config.ReadPlaybooks(p.dir)
	problems = append(problems, p.reg.SetOperatorPlaybooks(pbs)...)
	for _, err := range problems {
		p.log.Warn("an operator playbook is left out", "dir", p.dir, "reason", err.Error())
	}
}

// write writes every playbook the registry holds as
// skills/<name>/SKILL.md, each replaced atomically, and removes the skill
// directories of playbooks it no longer holds.
func (p *playbooks) write() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	skills := filepath.Join(p.dir, SkillsDir)
	if err := os.MkdirAll(skills, 0o700); err != nil {
		return fmt.Errorf("cannot create the skills directory %s: %w", skills, err)
	}
	keep := map[string]bool{}
	var errs []error
	for _, pb := range p.reg.Playbooks() {
		keep[pb.Name] = true
		dir := filepath.Join(skills, pb.Name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			errs = append(errs, fmt.Errorf("cannot create the skill directory %s: %w", dir, err))
			continue
		}
		if err := atomicfile.WriteFile(filepath.Join(dir, SkillFile), []byte(pb.Markdown), 0o600); err != nil {
			errs = append(errs, fmt.Errorf("cannot write the playbook %s: %w", pb.Name, err))
		}
	}
	entries, err := os.ReadDir(skills)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("cannot read the skills directory %s: %w", skills, err))...)
	}
	for _, e := range entries {
		if !keep[e.Name()] {
			if err := os.RemoveAll(filepath.Join(skills, e.Name())); err != nil {
				errs = append(errs, fmt.Errorf("cannot remove the skill %s: %w", e.Name(), err))
			}
		}
	}
	return errors.Join(errs...)
}
