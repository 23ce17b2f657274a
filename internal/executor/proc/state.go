package proc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/open-conduit/open-conduit/internal/atomicfile"
)

// Files of a supervised directory (see the package doc).
const (
	RecordFile        = "supervisor.json"
	LaunchFile        = "launch.json"
	StatusFile        = "status.json"
	StopFile          = "stop"
	LogFile           = "output.log"
	SupervisorLogFile = "supervisor.log"
)

// Record identifies the supervisor of an execution directory.
type Record struct {
	PID int `json:"pid"`
	// Start is the supervisor's start time in clock ticks since boot
	// (/proc/<pid>/stat field 22).
	Start  uint64 `json:"start_ticks"`
	BootID string `json:"boot_id"`
}

// Launch is what the supervisor needs to start the command. It holds the
// command's environment, secrets included, so it is written 0600 and the
// supervisor deletes it as soon as it has read it.
type Launch struct {
	Argv     []string `json:"argv"`
	Env      []string `json:"env"`
	Dir      string   `json:"dir"`
	LogLimit int64    `json:"log_limit"`
	// Stream, when set, names a file of the directory that receives the
	// command's stdout alone (an agent's machine-readable stream), bounded
	// by StreamLimit (DefaultStreamLimit when zero); the log then holds
	// stderr only. Empty: stdout and stderr share the log, in arrival
	// order.
	Stream      string `json:"stream,omitempty"`
	StreamLimit int64  `json:"stream_limit,omitempty"`
	// Stdin, when set, names a file of the directory the command reads as
	// its stdin (so that a long or private input stays off its command
	// line); /dev/null otherwise.
	Stdin string `json:"stdin,omitempty"`
	// IgnoreStopSignals starts the command with SIGTERM, SIGINT and SIGHUP
	// ignored: a sandbox's bwrap, which would otherwise die of the polite
	// stop and take its command down with it at once; the program inside
	// handles them itself and gets its grace.
	IgnoreStopSignals bool `json:"ignore_stop_signals,omitempty"`
}

// Status is how the command ended, as the supervisor saw it.
type Status struct {
	// Exited: the command exited on its own with ExitCode.
	Exited   bool `json:"exited"`
	ExitCode int  `json:"exit_code"`
	// Signal names the signal that killed the command ("SIGKILL").
	Signal string `json:"signal,omitempty"`
	// StartError says why the command never started.
	StartError   string `json:"start_error,omitempty"`
	LogTruncated bool   `json:"log_truncated,omitempty"`
	// StreamTruncated: the stream file reached its limit.
	StreamTruncated bool `json:"stream_truncated,omitempty"`
}

// writeFileAtomic replaces dir/name with data through an owner-only temporary
// file in the same directory, fsync and rename, so that a reader sees either
// nothing or the whole file.
func writeFileAtomic(dir, name string, data []byte, opts ...atomicfile.Option) error {
	return atomicfile.WriteFile(filepath.Join(dir, name), data, 0o600, opts...)
}

// WriteJSONFile writes v as JSON to dir/name, owner-only and whole, and
// durably.
func WriteJSONFile(dir, name string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeFileAtomic(dir, name, append(data, '\n'))
}

// writeStateFile writes one of the supervisor's own files (launch, record,
// status) as WriteJSONFile does, whole, but without a sync: a crash of the
// machine ends the supervisor and its command, and what these files say
// is then either meaningless (a process of an earlier boot) or what the
// same crash a moment earlier would have left (docs/executor-shell.md,
// "What a crash keeps"). ReadJSONFile reads the empty file such a crash can
// leave as no file.
func writeStateFile(dir, name string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeFileAtomic(dir, name, append(data, '\n'), atomicfile.NoSync())
}

// ReadJSONFile reads dir/name into v; ok is false if the file does not
// exist, or is empty: all a crash of the machine can leave of a file
// written without a sync.
func ReadJSONFile(dir, name string, v any) (ok bool, err error) {
	data, err := os.ReadFile(filepath.Join(dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if len(data) == 0 {
		return false, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return false, fmt.Errorf("%s in the execution directory is damaged: %w", name, err)
	}
	return true, nil
}

// writeRecord records the process pid as the supervisor of dir.
func writeRecord(dir string, pid int) error {
	st, err := ReadProcStat(pid)
	if err != nil {
		return err
	}
	boot, err := BootID()
	if err != nil {
		return err
	}
	return writeStateFile(dir, RecordFile, Record{PID: pid, Start: st.Start, BootID: boot})
}

// WriteStop records why the executor is stopping the group, unless an
// earlier stop already said why: the first reason stands. The file appears
// whole (written aside, then linked into place) or not at all.
func WriteStop(dir, reason string) error {
	if err := atomicfile.WriteNew(filepath.Join(dir, StopFile), []byte(reason+"\n"), 0o600); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return nil
}

// ReadStop returns the reason the group was stopped, or "".
func ReadStop(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, StopFile))
	if err != nil {
		return ""
	}
	return string(bytes.TrimSpace(b))
}
