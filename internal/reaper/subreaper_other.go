//go:build !linux

package reaper

// becomeSubreaper does nothing where the platform has no subreapers: the
// command's own group is still killed when it ends.
func becomeSubreaper() error { return nil }
