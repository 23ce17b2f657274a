// Package scheduler runs Work: it claims ready Work up to MaxRunning, gives
// each attempt a lease and an epoch, starts its segments on executors
// (Run, Recover, Resume) on goroutines it owns, renews the leases it holds,
// applies what a segment reports (Complete, with its declaration), fires
// timers, and recovers attempts whose lease expired.
//
// It must never let a superseded epoch act: every renewal, release and
// completion is a storage compare-and-set on (owner, epoch, state), so the
// fence is the record itself and not a check in memory. It must never run
// an executor call inside a storage transaction, never read the system
// clock (the clock is injected; tests advance a fake one), and never store
// a token, a secret or an executor's environment.
//
// # Work
//
//	from                 to                    when
//	(new)                ready                 created, with its core.work.created
//	ready                running               claimed: a new execution, or its parked one resumed
//	ready                waiting               a start gate parks it before its first attempt
//	ready                failed                a start gate refuses its first attempt
//	running              waiting               Complete applies a declared wait
//	running              ready                 Complete: succeeded, but input was queued after the
//	                                           attempt's watermark; or the attempt could not start
//	waiting              ready                 a wake (an event satisfies the Wait) or its timeout;
//	                                           a start gate's Work has its gates asked again
//	running              succeeded|failed|     Complete: the executor's result, or a declared outcome
//	                     cancelled
//	ready|running|       cancelled             Work cancel
//	waiting
//	failed|cancelled     ready                 retry (core.manual.retry)
//	running              ready                 recovery finds the attempt never launched
//
// Any nonterminal Work can be held (BlockedReason): operator_cancelled
// (execution cancel), secret_unavailable, toolbelt_unavailable,
// binding_unavailable, sandbox_unavailable (an executor's Preflight),
// attempt_lost, start_gate / a start gate's own reason, operator_held (an
// operator's hold). A held Work is not claimed, resumed or recovered until a retry
// (core.manual.retry) or, for an operator's hold, a release lifts it; a retry of a held running Work starts
// nothing: recovery adopts its attempt again. Under operator_held a running
// attempt goes on: it is renewed and recovered as any other. Work cancel ends any nonterminal Work.
// A terminal Work releases its keys and emits core.work.finished.
//
// # Execution
//
//	from        to                       when
//	(new)       running, epoch 1         claim
//	running     finished (succeeded,     Complete
//	            failed, cancelled)
//	running     parked                   Complete: a resume-capable executor's segment ended
//	                                     normally (succeeded or suspended) on a declared wait
//	parked      running, epoch+1         claim of the woken Work (Resume)
//	running     running, epoch+1         lease expired, or adoption by a new daemon (Recover)
//	running     stopping                 Work cancel or execution cancel (the epoch is fenced)
//	stopping    stopping, epoch+1        lease expired or adoption (the new holder stops it)
//	stopping    finished (cancelled)     the host observed the stop (ConfirmStopped)
//	parked      finished (cancelled)     Work cancel or execution cancel
//	stopping    finished (lost)          recovery has no executor to stop it
//
//	running     finished (cancelled)     recovery of an attempt never launched (its daemon
//	                                     stopped between claim and launch): not counted, and
//	                                     the Work is ready again, unheld
//
// Launch: the last write before an executor may start a process is the
// launch marker (LaunchedEpoch = Epoch, a fenced update; recovery carries
// it to its epoch). An attempt recovered without it never ran. A claim
// whose marker is fenced starts nothing. A new attempt whose preparation
// has nothing that can wait or fail late (no token, endpoint, secret or
// directory: see prepareAtClaim) is prepared before its claim, and the
// claim inserts its execution launched: the claim is then that last
// write, and the segment starts once it commits.
//
// One process per Work: no attempt of a Work starts while one of its
// executions is running, stopping or parked (claim skips such a Work, and
// storage refuses a second live execution), and nothing an operator or a
// crash does makes an attempt whose process may still be alive count as
// ended: an attempt recovery could not adopt (its toolbelt endpoint or
// token failed, or its run directory) stays running with its lease
// expired and its Work running, held, and a retry of that Work only lets
// recovery adopt it again (kernel.Runtime.RetryInTx queues no input for a
// running Work, so its end does not make the Work go on). Recovery never
// resolves secrets: it starts nothing.
//
// Recover of a launched segment that left nothing behind finishes it lost
// (and holds the Work with attempt_lost). A stopping attempt whose executor this
// daemon does not have finishes lost too: its process may still run, so a
// Work that has not ended is held attempt_lost until an operator checks
// and retries it. A parked execution cancelled by an operator finishes
// cancelled at once.
//
// # Start gates
//
// Before a Work's first attempt (no attempt yet, no live execution) the
// claim asks the start gates (Options.StartGates, for the Work's scope and
// the generation the attempt would be pinned to) in registration-name
// order, outside any transaction, each bounded by StartGateTimeout. They
// are shown the Work, its binding and its queued inputs. Every gate
// letting it through, the claim goes on. The first that does not decides:
//
//   - park (a WaitPlan): in one transaction the Work goes from ready to
//     waiting with the gate's reason (WaitReason, "start gate <name>:
//     <reason>"), and a Wait owned by the gate's registration, with no
//     execution, is registered like a declared wait (its timeout armed,
//     backscanned from the last event the gate was shown). Its events or
//     its timeout make the Work ready again (the reason cleared, the
//     waking event or core.wait.timed_out queued as its input) and the
//     next claim asks every gate again;
//   - refuse (an *extension.OperationError): the Work fails with the
//     gate's message, its outcome data {"code", "gate"};
//   - fail: a panic, a timeout, an invalid plan or any other error fails
//     the Work with gate_failed (only the error's Go type is logged).
//
// A retry of a refused Work asks the gates again (it still has had no
// attempt); a later attempt, a resume or a recovery never asks them. A
// shutdown that cuts a gate short decides nothing: the Work stays ready.
//
// # Limits
//
// MaxRunning, Lease and AttemptTimeout are given at start
// (Options.Limits) and replaced with SetLimits when a new
// configuration generation becomes active. Each decision reads the
// current limits once: MaxRunning bounds the next Claim (running attempts
// are never stopped when it drops), Lease the next lease taken or renewed,
// AttemptTimeout the deadline of the next claim or resume (a running
// segment keeps its deadline, and recovery keeps it too).
//
// # Leases
//
// A lease lasts Limits.Lease and names its owner (the daemon instance id)
// and epoch. The daemon renews it with Heartbeat (every Lease/3). The
// holder stops trusting a lease runtime.LeaseMargin (5s by default) before
// it expires: LeaseGuard refuses toolbelt calls inside the margin, and
// Heartbeat neither renews inside it nor keeps observing: it detaches and
// leaves the attempt to recovery. Owner liveness is decided by lease expiry
// alone; at start the daemon, which holds the state directory's exclusive
// lock, adopts at once every attempt a previous owner of its node (the
// state directory, Options.Node) left (RecoverOrphans). An expired attempt
// launched on another node cannot be adopted: recovery finishes it lost
// and holds its Work attempt_lost, and the other node's daemon, finding
// its lease taken over, stops the process it left, or, when it was down
// meanwhile, its node's next daemon does at start (see nodes.go).
//
// # Duties
//
// On a store several daemons share, FireDue and RecoverExpired run only
// while Options.Duties says this daemon holds their duty (DutyTimers,
// DutyRecovery); Duties takes and renews those leases, as the node, with
// the daemon's heartbeat.
//
// # Preparing a claim
//
// A claim or resume commits in the round; its segment is prepared (token,
// endpoint, secrets) and started on a goroutine of its own, so a slow
// secret delays no round, no stop and no other binding. At most
// PrepareWorkers claims are prepared at once and PreparePerBinding per
// binding whose preparation can block (it resolves a secret or makes a
// toolbelt endpoint): Work of a binding at its limit is passed over (left
// ready, unclaimed) and claimed by the round that follows the end of its
// binding's preparation. A binding that selects no secret on an executor
// that needs no endpoint (Binding.NoSecrets) is held to PrepareWorkers
// alone, so one round claims many of its Work in one transaction. A claim being prepared keeps its lease
// (Heartbeat); a cancel meanwhile cuts the preparation short and confirms
// the stop, nothing having started; Close cuts it short and gives it back.
//
// # Inputs
//
// Each claim or resume acknowledges the Work's queued inputs up to the
// last one (the execution's InputWatermark); they are never given to
// another attempt. A segment that could not start (token, endpoint or
// secret failure, or a shutdown that began before it started) gives them
// back; a shutdown also takes back the claim itself, so that the next
// daemon finds no attempt that never ran. Recovery re-attaches to the same
// segment and acknowledges nothing new.
package scheduler
