package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/open-conduit/open-conduit/extension"
)

// PlaybooksDir is the directory, beside the configuration file, that holds
// the operator's own playbooks, one Markdown file each: playbooks/<name>.md.
const PlaybooksDir = "playbooks"

// MaxPlaybookSize bounds an operator's playbook file.
const MaxPlaybookSize = 256 << 10

// ReadPlaybooks reads the operator's playbooks from dir: every regular
// file <name>.md directly in it, sorted by name. A file whose name is not
// a playbook name, that is larger than MaxPlaybookSize, cannot be read or
// fails extension.CheckPlaybook is left out, with a problem naming the
// file and why (never its content). Other entries (directories such as
// the daemon's skills/, files of other suffixes) are ignored, and a
// missing dir holds none.
func ReadPlaybooks(dir string) ([]extension.Playbook, []error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, []error{fmt.Errorf("cannot read the playbooks directory %s: %w", dir, err)}
	}
	var (
		out      []extension.Playbook
		problems []error
	)
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".md")
		if !ok || !e.Type().IsRegular() {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if !validPlaybookName(name) {
			problems = append(problems, fmt.Errorf("playbook file %s: %w: its name is not a playbook name (a lower-case letter followed by up to 62 lower-case letters, digits, '-' or '_')", path, extension.ErrInvalid))
			continue
		}
		data, err := readPlaybook(path)
		if err != nil {
			problems = append(problems, fmt.Errorf("playbook file %s: %w", path, err))
			continue
		}
		p := extension.Playbook{Name: name, Markdown: string(data)}
		if err := extension.CheckPlaybook(p); err != nil {
			problems = append(problems, fmt.Errorf("playbook file %s: %w", path, err))
			continue
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, problems
}

func readPlaybook(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxPlaybookSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxPlaybookSize {
		return nil, fmt.Errorf("%w: it is larger than %d bytes", extension.ErrInvalid, MaxPlaybookSize)
	}
	return data, nil
}
