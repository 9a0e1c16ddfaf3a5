//! SIGINT/SIGTERM/SIGHUP become a flag that the measuring loops poll, so that every exit
//! path runs the same cleanup (kill and reap children, remove IPC objects, unmap) through
//! ordinary `Drop`s instead of from inside a signal handler.
//!
//! The handlers are installed without `SA_RESTART`: a blocking call returns `EINTR`, the
//! caller finishes what it must (reaping the child it just forked) and then sees the flag.

use std::sync::atomic::{AtomicI32, Ordering};

use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};

use super::error::{Error, Result};

/// The first stop signal received, or 0.
static STOP: AtomicI32 = AtomicI32::new(0);

/// Signals that stop a run (exit status 128 + signal after cleanup).
pub const STOP_SIGNALS: [Signal; 3] = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP];

extern "C" fn on_stop_signal(sig: libc::c_int) {
    let _ = STOP.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
}

/// Installs the flag-setting handlers for [`STOP_SIGNALS`].
pub fn install() -> Result<()> {
    let action = SigAction::new(
        SigHandler::Handler(on_stop_signal),
        SaFlags::empty(),
        SigSet::empty(),
    );
    for sig in STOP_SIGNALS {
        // SAFETY: the handler only does an atomic store, which is async-signal-safe.
        unsafe { sigaction(sig, &action) }
            .map_err(|e| Error::sys(format!("sigaction({sig})"), e))?;
    }
    Ok(())
}

/// The stop signal received so far, if any.
pub fn pending() -> Option<i32> {
    match STOP.load(Ordering::SeqCst) {
        0 => None,
        sig => Some(sig),
    }
}

/// `Err(Interrupted)` once a stop signal has arrived.
pub fn check() -> Result<()> {
    match pending() {
        Some(sig) => Err(Error::Interrupted(sig)),
        None => Ok(()),
    }
}

/// In a freshly forked child: ignore the stop signals, so a terminal's Ctrl-C (sent to the
/// whole process group) reaches only the parent, which then kills and reaps its children in
/// order. Async-signal-safe.
pub fn child_ignore_stop_signals() {
    for sig in STOP_SIGNALS {
        // SAFETY: signal(2) with SIG_IGN is async-signal-safe and touches no Rust state.
        unsafe { libc::signal(sig as libc::c_int, libc::SIG_IGN) };
    }
}

/// In a helper thread: block the stop signals so they are delivered to the main thread,
/// whose blocking calls they must interrupt.
pub fn block_in_this_thread() {
    let mut set = SigSet::empty();
    for sig in STOP_SIGNALS {
        set.add(sig);
    }
    let _ = set.thread_block();
}
