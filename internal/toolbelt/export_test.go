package toolbelt

// SetFlightWaitHook has f called whenever a call starts waiting for a
// running call of the same execution and request ID. Set it before any
// call.
func SetFlightWaitHook(tb *Toolbelt, f func()) { tb.flightWait = f }
