package shell

import "github.com/open-conduit/open-conduit/internal/executor/proc"

// The supervised machinery moved to proc; these names keep this package's
// tests reading as they did.
const (
	recordFile = proc.RecordFile
	launchFile = proc.LaunchFile
)

type (
	record = proc.Record
	launch = proc.Launch
)

var (
	bootID           = proc.BootID
	readProcStat     = proc.ReadProcStat
	watchPID         = proc.WatchPID
	writeJSONFile    = proc.WriteJSONFile
	readJSONFile     = proc.ReadJSONFile
	truncationMarker = proc.TruncationMarker
	errNoProcess     = proc.ErrNoProcess
)
