//! Asymmetric fences: a free one on the add path, a process-wide one on the rare side.
//!
//! Two handshakes of the protocol are Dekker's: each side writes its own flag, fences, and reads
//! the other's, so at least one of the two sees the other.
//!
//! | light side (every add, `tickwheel`'s `add.rs`) | heavy side (rare)                                       |
//! |------------------------------------------------|---------------------------------------------------------|
//! | publish the slot word, read `lifecycle`        | shutdown: close `lifecycle`, scan the slot words         |
//! | push the ring record, read `next_wake`         | tick thread: raise `next_wake` ([`Shard::collect`]), then look at the ring ([`Shard::settle`]) |
//!
//! A sequentially consistent fence on both sides costs the add path a locked instruction on every
//! add: about 9 ns of a 46 ns add + cancel pair on one thread (W6, with the fence made a compiler
//! fence for the measurement). Linux's `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)` lets the
//! sides trade: it makes every running thread of the process execute a full memory barrier before
//! it returns (an interrupt to each CPU running one; a thread not running passes one as it is
//! switched), so the frequent side only has to stop the *compiler* from reordering its write and
//! its read. Whatever point the barrier hits in the adder's code: before its write, its later read
//! sees the heavy side's write (made before the syscall); after it, its write is visible when the
//! syscall returns, and the heavy side's read sees it. The same argument as the kernel's own
//! documentation of `membarrier` and folly's `asymmetricLightBarrier`/`asymmetricHeavyBarrier`.
//!
//! The heavy side runs once per round of the tick thread that collected a shard (at most once a
//! tick, however many shards it collected: one barrier covers them all) and once per shutdown: a
//! system call plus an interrupt to each other CPU then running a thread of the process, where
//! adds save nanoseconds each. The price is per busy timer: a process with many timers whose
//! tick threads all work every tick sends that many interrupts a tick; one timer per process, the
//! design's intent, sends at most one per tick.
//!
//! [`Shard::collect`]: crate::Shard::collect
//! [`Shard::settle`]: crate::Shard::settle
//!
//! Where `membarrier` is missing (other systems, kernels before 4.14, a seccomp filter that
//! refuses it) both sides use `fence(SeqCst)`, as before. The choice is made once, before the
//! first timer exists, and never changes: a light side that saw "asymmetric" always meets a heavy
//! side that issues the syscall. Under loom both are `fence(SeqCst)`: loom cannot model a
//! process-wide barrier, so the models check the symmetric protocol, and this module's argument
//! carries it over.

use crate::loom::atomic::{Ordering::SeqCst, fence};

/// The frequent side's half: a compiler fence when the heavy side is `membarrier`, else a full
/// fence. Pairs only with [`heavy`].
#[inline(always)]
pub fn light() {
    if imp::asymmetric() {
        std::sync::atomic::compiler_fence(SeqCst);
    } else {
        fence(SeqCst);
    }
}

/// The rare side's half: a process-wide barrier when available, else a full fence. Pairs with
/// [`light`] and with `fence(SeqCst)`.
pub fn heavy() {
    if imp::asymmetric() {
        imp::membarrier();
    } else {
        fence(SeqCst);
    }
}

/// Chooses between `membarrier` and plain fences, once per process. Call it before any thread can
/// reach [`light`] (a timer calls it as it is built); until then both sides are full fences.
/// Idempotent.
pub fn init() {
    imp::init();
}

#[cfg(all(target_os = "linux", not(loom)))]
#[allow(unsafe_code)]
mod imp {
    use std::sync::Once;
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

    /// Set once, before any timer exists, if this process registered for `membarrier`.
    static ASYMMETRIC: AtomicBool = AtomicBool::new(false);
    static INIT: Once = Once::new();

    // From the kernel's `include/uapi/linux/membarrier.h` (not in the `libc` crate).
    const MEMBARRIER_CMD_QUERY: libc::c_int = 0;
    const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
    const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;

    fn sys_membarrier(cmd: libc::c_int) -> libc::c_long {
        // SAFETY: `membarrier(cmd, flags, cpu_id)` takes integers only and touches no memory of
        // ours; an unknown command or a kernel without it returns -1 (ENOSYS, EINVAL, EPERM).
        unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                cmd,
                0 as libc::c_uint,
                0 as libc::c_int,
            )
        }
    }

    #[inline(always)]
    pub(super) fn asymmetric() -> bool {
        ASYMMETRIC.load(Relaxed)
    }

    pub(super) fn init() {
        INIT.call_once(|| {
            let supported = sys_membarrier(MEMBARRIER_CMD_QUERY);
            let wanted = libc::c_long::from(
                MEMBARRIER_CMD_PRIVATE_EXPEDITED | MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
            );
            if supported >= 0
                && supported & wanted == wanted
                && sys_membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0
            {
                ASYMMETRIC.store(true, Relaxed);
            }
        });
    }

    /// Issues the process-wide barrier.
    pub(super) fn membarrier() {
        // Cannot fail once the process is registered (registration lasts the process's life). If
        // it ever did, adders that saw `asymmetric()` would have had no barrier to pair with, and
        // a task could be stranded: stopping is the only safe answer.
        if sys_membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0 {
            eprintln!("tickwheel: membarrier failed after registration; aborting (see barrier.rs)");
            std::process::abort();
        }
    }
}

#[cfg(not(all(target_os = "linux", not(loom))))]
mod imp {
    #[inline(always)]
    pub(super) fn asymmetric() -> bool {
        false
    }

    pub(super) fn init() {}

    pub(super) fn membarrier() {
        unreachable!("never asymmetric here")
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::Barrier;
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    use std::thread;

    use super::*;

    #[test]
    fn the_choice_is_made_once() {
        init();
        let first = imp::asymmetric();
        init();
        assert_eq!(imp::asymmetric(), first);
    }

    /// The store-buffering litmus test, the shape of both handshakes: each side writes its flag,
    /// fences (light on one side, heavy on the other) and reads the other's. Without the fences
    /// x86 lets both reads miss both writes; with them, at least one read sees the other's write in
    /// every round.
    #[test]
    fn a_light_and_a_heavy_fence_never_both_miss() {
        init();
        const ROUNDS: u64 = 20_000;
        let (x, y) = (AtomicU64::new(0), AtomicU64::new(0));
        let start = Barrier::new(2);
        let seen_by_light = AtomicU64::new(0);
        thread::scope(|s| {
            s.spawn(|| {
                for round in 1..=ROUNDS {
                    start.wait();
                    x.store(round, Relaxed);
                    light();
                    seen_by_light.store(y.load(Relaxed), Relaxed);
                    start.wait();
                }
            });
            for round in 1..=ROUNDS {
                start.wait();
                y.store(round, Relaxed);
                heavy();
                let seen_by_heavy = x.load(Relaxed);
                start.wait();
                assert!(
                    seen_by_heavy == round || seen_by_light.load(Relaxed) == round,
                    "round {round}: both sides missed the other's write"
                );
            }
        });
    }
}
