package agent

import (
	"encoding/json"

	"github.com/open-conduit/open-conduit/extension"
)

// Namer names the playbook an agent binding's config starts the agent's
// turns on, for validation (extension.PlaybookNamer); it runs nothing.
type Namer struct {
	Spec Spec
}

var _ extension.PlaybookNamer = Namer{}

// PlaybookName names the playbook a (checked) binding config starts the
// agent's turns on; "" for none or a config that does not parse.
func (n Namer) PlaybookName(config json.RawMessage) string {
	cfg, err := ParseConfig(n.Spec, config)
	if err != nil {
		return ""
	}
	return cfg.Playbook
}
