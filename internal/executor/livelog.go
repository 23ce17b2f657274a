package executor

// LiveLogger is implemented by an executor whose segments write their log
// to a file while they run, so that the host can show a running
// attempt's output before the segment ends (open-conduit work logs -f).
// It is optional: an executor without it shows its log once the segment
// ended and the host stored the log artifact.
type LiveLogger interface {
	// LiveLog says where the segment of epoch, running in the execution
	// directory dir (RunRequest.Dir), writes its log. ok is false when
	// that segment writes none. It only names the path: the file may not
	// exist yet, and the executor's own writer is the only one that ever
	// writes it.
	LiveLog(dir string, epoch int64) (path string, ok bool)
}
