//go:build !linux

package reaper

// BecomeSubreaper does nothing where the platform has no subreapers: the
// command's own group is still killed when it ends.
func BecomeSubreaper() error { return nil }
