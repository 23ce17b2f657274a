//go:build !linux

package proc

import (
	"errors"
	"syscall"
)

// The shell executor adopts processes through /proc and pidfds, which only
// Linux has. Elsewhere the package builds, and Run, Recover and Stop refuse
// with errUnsupported.

var errUnsupported = errors.New("the shell executor needs Linux (pidfd and /proc)")

type ProcStat struct {
	State   byte
	PGID    int
	Session int
	Start   uint64
}

var ErrNoProcess = errors.New("no such process")

func ReadProcStat(int) (ProcStat, error)          { return ProcStat{}, errUnsupported }
func BootID() (string, error)                     { return "", errUnsupported }
func groupMembers(int) ([]int, error)             { return nil, errUnsupported }
func signalMember(int, int, syscall.Signal) error { return errUnsupported }
func WatchPID(int, uint64) (*PIDWatch, error)     { return nil, errUnsupported }
func watchChild(int, func()) error                { return errUnsupported }
func setSubreaper() error                         { return errUnsupported }

type PIDWatch struct{ done chan struct{} }

func (w *PIDWatch) Done() <-chan struct{} { return w.done }
func (w *PIDWatch) Release()              {}
