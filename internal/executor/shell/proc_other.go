//go:build !linux

package shell

import (
	"errors"
	"syscall"
)

// The shell executor adopts processes through /proc and pidfds, which only
// Linux has. Elsewhere the package builds, and Run, Recover and Stop refuse
// with errUnsupported.

var errUnsupported = errors.New("the shell executor needs Linux (pidfd and /proc)")

type procStat struct {
	State   byte
	PGID    int
	Session int
	Start   uint64
}

var errNoProcess = errors.New("no such process")

func readProcStat(int) (procStat, error)          { return procStat{}, errUnsupported }
func bootID() (string, error)                     { return "", errUnsupported }
func groupMembers(int) ([]int, error)             { return nil, errUnsupported }
func signalMember(int, int, syscall.Signal) error { return errUnsupported }
func watchPID(int, uint64) (*pidWatch, error)     { return nil, errUnsupported }
func setSubreaper() error                         { return errUnsupported }

type pidWatch struct{ done chan struct{} }

func (w *pidWatch) Done() <-chan struct{} { return w.done }
func (w *pidWatch) Release()              {}
