package configsvc

import (
	"bytes"

	"github.com/open-conduit/open-conduit/internal/config"
)

// keepRedacted gives each secret of data written in the redacted form GET
// /v1/config shows (<scheme>:<redacted>) the active generation's
// reference, so that a document read back from `config get` applies as
// the configuration it was (config.KeepRedacted). Apply and ValidateStored
// judge what it returns; a form it cannot fill is refused there.
func (s *Service) keepRedacted(data []byte) []byte {
	if !bytes.Contains(data, []byte(":<redacted>")) {
		return data
	}
	cur := s.active.Load()
	if cur == nil {
		return data
	}
	active, err := s.readDocument(cur.gen.Hash)
	if err != nil {
		return data
	}
	return config.KeepRedacted(data, active)
}
