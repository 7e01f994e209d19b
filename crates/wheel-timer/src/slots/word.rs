//! The slot word: one `u64` per task slot, holding the slot's generation, its handle count and
//! the state of the task in it. Every change of a task's fate is one compare-and-swap of this
//! word; whoever wins it acts, everybody else backs off.
//!
//! | bits    | field        | meaning |
//! |---------|--------------|---------|
//! | 0..4    | state        | see below |
//! | 4       | `STOP`       | with `RUNNING`: a cancel asked the periodic task to stop after this run |
//! | 5       | `PERIODIC`   | the task repeats (set at add, fixed while the slot is occupied) |
//! | 6       | `STAMPED`    | with `QUEUED`: the deadline is already known (else the slot holds a delay) |
//! | 7       | `BUSY`       | with `RUNNING`: the task's closure is running now (a cancel of a periodic task from another thread waits for it to end) |
//! | 8       | `WAKE`       | the task wakes a future (`Sleep`, `Timeout`, `Interval`): it runs on the thread that hands it out, not on the executor (set at add, fixed while the slot is occupied) |
//! | 9       | `PLAIN`      | the cell holds nothing to drop: a one-shot closure of a zero-size type without drop glue, and no key (set at add, fixed while the slot is occupied); a cancel overwrites the cell without reading it (see `Slot::discard`) |
//! | 10      | `HELD`       | in a holding state: a future's poll has the cell for a moment, to leave or take its waker there; a move that takes the task waits for it to clear (see `waker.rs`) |
//! | 11..32  | handles      | live [`TimerHandle`](crate::TimerHandle)s naming this slot; sticky at its maximum |
//! | 32..64  | generation   | bumped each time the slot is vacated, so stale references never match |
//!
//! ## States
//!
//! | state       | the task is ...                                   | the closure is in the cell |
//! |-------------|---------------------------------------------------|----------------------------|
//! | `VACANT`    | absent: the slot is free                          | no |
//! | `QUEUED`    | waiting, not yet in the wheel: recorded in the owner's ring, or (stamped, far out) in the shard's young queue | yes |
//! | `WAITING`   | waiting in the shard's wheel                      | yes |
//! | `DUE`       | handed to the executor, its job not started       | yes |
//! | `RUNNING`   | taken by its job, which runs it (or is between runs) | no: the job holds it |
//! | `DONE`      | ran (a periodic task: ended) and will not run again | no |
//! | `CANCELLED` | stopped by a successful `cancel`                  | no |
//! | `RETURNED`  | handed back by `shutdown`                         | no |
//!
//! The last three are final. A slot is vacated (generation + 1, free for reuse) once its task is
//! final and no handle names it: by whoever makes it final if there are no handles, else by the
//! last handle dropped. So a handle's generation always matches its slot while the handle lives.

/// A task's state, the low four bits of the word.
pub(crate) type State = u64;

pub(crate) const VACANT: State = 0;
pub(crate) const QUEUED: State = 1;
pub(crate) const WAITING: State = 2;
pub(crate) const DUE: State = 3;
pub(crate) const RUNNING: State = 4;
pub(crate) const DONE: State = 5;
pub(crate) const CANCELLED: State = 6;
pub(crate) const RETURNED: State = 7;

const STATE_MASK: u64 = 0xF;
pub(crate) const STOP: u64 = 1 << 4;
pub(crate) const PERIODIC: u64 = 1 << 5;
pub(crate) const STAMPED: u64 = 1 << 6;
pub(crate) const BUSY: u64 = 1 << 7;
pub(crate) const WAKE: u64 = 1 << 8;
pub(crate) const PLAIN: u64 = 1 << 9;
pub(crate) const HELD: u64 = 1 << 10;
const FLAGS: u64 = STOP | PERIODIC | STAMPED | BUSY | WAKE | PLAIN;
const HANDLE_SHIFT: u32 = 11;
const HANDLE_ONE: u64 = 1 << HANDLE_SHIFT;
/// The largest handle count; a count that reaches it never moves again (the slot stays pinned).
pub(crate) const MAX_HANDLES: u64 = (1 << 21) - 1;
const GEN_SHIFT: u32 = 32;

/// A decoded slot word.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Word(pub(crate) u64);

impl Word {
    /// A freshly occupied slot of generation `generation`: one handle, the given state and flags.
    #[inline]
    pub(crate) fn occupied(generation: u32, state: State, flags: u64) -> Word {
        debug_assert!(flags & !FLAGS == 0 && state <= RETURNED);
        Word((u64::from(generation) << GEN_SHIFT) | HANDLE_ONE | flags | state)
    }

    #[inline]
    pub(crate) fn generation(self) -> u32 {
        (self.0 >> GEN_SHIFT) as u32
    }

    #[inline]
    pub(crate) fn state(self) -> State {
        self.0 & STATE_MASK
    }

    #[inline]
    pub(crate) fn handles(self) -> u64 {
        (self.0 >> HANDLE_SHIFT) & MAX_HANDLES
    }

    #[inline]
    pub(crate) fn has(self, flag: u64) -> bool {
        self.0 & flag != 0
    }

    /// True if the word is of generation `generation` and in state `state`.
    #[inline]
    pub(crate) fn is(self, generation: u32, state: State) -> bool {
        self.generation() == generation && self.state() == state
    }

    #[inline]
    pub(crate) fn is_final(self) -> bool {
        matches!(self.state(), DONE | CANCELLED | RETURNED)
    }

    /// The same word in `state` (`STOP`, `STAMPED` and `BUSY` cleared; `PERIODIC`, `WAKE`,
    /// `PLAIN`, the handles, and `HELD` kept). `HELD` must survive a move between holding
    /// states (a poll may hold the cell while the task is filed or handed out): cleared here, a
    /// job's claim could take the task while the poll is in the cell.
    #[inline]
    pub(crate) fn with_state(self, state: State) -> Word {
        Word((self.0 & !(STATE_MASK | STOP | STAMPED | BUSY)) | state)
    }

    #[inline]
    pub(crate) fn with(self, flag: u64) -> Word {
        Word(self.0 | flag)
    }

    #[inline]
    pub(crate) fn without(self, flag: u64) -> Word {
        Word(self.0 & !flag)
    }

    /// The word after a move to the final state `state`: vacant of the next generation when no
    /// handle names the slot, else `state` with the handles kept.
    #[inline]
    pub(crate) fn finished(self, state: State) -> Word {
        debug_assert!(matches!(state, DONE | CANCELLED | RETURNED));
        if self.handles() == 0 {
            self.vacated()
        } else {
            self.with_state(state)
        }
    }

    /// The vacant word of the next generation.
    #[inline]
    pub(crate) fn vacated(self) -> Word {
        Word(u64::from(self.generation().wrapping_add(1)) << GEN_SHIFT)
    }

    /// One more handle (a sticky count stays put).
    #[inline]
    pub(crate) fn plus_handle(self) -> Word {
        if self.handles() == MAX_HANDLES {
            self
        } else {
            Word(self.0 + HANDLE_ONE)
        }
    }

    /// One handle fewer; if that was the last one of a final task, the vacant next generation.
    #[inline]
    pub(crate) fn minus_handle(self) -> Word {
        match self.handles() {
            MAX_HANDLES => self,
            0 => {
                debug_assert!(false, "a handle count below zero");
                self
            }
            1 if self.is_final() => self.vacated(),
            _ => Word(self.0 - HANDLE_ONE),
        }
    }
}

impl std::fmt::Debug for Word {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = [
            "VACANT",
            "QUEUED",
            "WAITING",
            "DUE",
            "RUNNING",
            "DONE",
            "CANCELLED",
            "RETURNED",
        ]
        .get(self.state() as usize)
        .copied()
        .unwrap_or("?");
        write!(
            f,
            "Word(gen {}, {name}{}{}{}{}{}{}{}, {} handles)",
            self.generation(),
            if self.has(STOP) { "|STOP" } else { "" },
            if self.has(PERIODIC) { "|PERIODIC" } else { "" },
            if self.has(STAMPED) { "|STAMPED" } else { "" },
            if self.has(BUSY) { "|BUSY" } else { "" },
            if self.has(WAKE) { "|WAKE" } else { "" },
            if self.has(PLAIN) { "|PLAIN" } else { "" },
            if self.has(HELD) { "|HELD" } else { "" },
            self.handles()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip() {
        let w = Word::occupied(u32::MAX, QUEUED, PERIODIC | STAMPED);
        assert_eq!(
            (w.generation(), w.state(), w.handles()),
            (u32::MAX, QUEUED, 1)
        );
        assert!(w.has(PERIODIC) && w.has(STAMPED) && !w.has(STOP));
        let r = w.with_state(RUNNING).with(STOP);
        assert_eq!(r.state(), RUNNING);
        assert!(r.has(STOP) && r.has(PERIODIC) && !r.has(STAMPED));
        assert_eq!(r.generation(), u32::MAX);
        // `PLAIN` stays with the task through its states and the handle count, and leaves
        // with it.
        let p = Word::occupied(7, QUEUED, PLAIN)
            .plus_handle()
            .with_state(CANCELLED);
        assert!(p.has(PLAIN) && !p.has(PERIODIC) && p.handles() == 2);
        assert!(!p.vacated().has(PLAIN));
    }

    #[test]
    fn final_moves_vacate_exactly_when_no_handle_is_left() {
        // (handles, final state, vacated?)
        let table = [
            (0, DONE, true),
            (1, DONE, false),
            (0, CANCELLED, true),
            (2, RETURNED, false),
        ];
        for (handles, state, vacant) in table {
            let mut w = Word::occupied(7, RUNNING, 0);
            w = w.minus_handle();
            for _ in 0..handles {
                w = w.plus_handle();
            }
            let f = w.finished(state);
            assert_eq!(f.state() == VACANT, vacant, "{handles} handles, {f:?}");
            if vacant {
                assert_eq!((f.generation(), f.handles()), (8, 0));
            } else {
                assert_eq!((f.state(), f.handles()), (state, handles));
            }
        }
    }

    #[test]
    fn the_last_handle_of_a_final_task_vacates_and_the_generation_wraps() {
        let w = Word::occupied(u32::MAX, DUE, 0).with_state(DONE);
        let v = w.minus_handle();
        assert_eq!((v.state(), v.generation(), v.handles()), (VACANT, 0, 0));
        let live = Word::occupied(3, WAITING, 0).minus_handle();
        assert_eq!(
            (live.state(), live.handles()),
            (WAITING, 0),
            "not final: kept"
        );
    }

    #[test]
    fn a_saturated_handle_count_is_sticky() {
        let mut w = Word::occupied(1, WAITING, 0);
        while w.handles() < MAX_HANDLES {
            w = Word(w.0 + (MAX_HANDLES - w.handles()) * HANDLE_ONE);
        }
        assert_eq!(w.plus_handle(), w);
        assert_eq!(w.minus_handle(), w);
        assert_eq!(w.state(), WAITING, "the count never spills into the state");
        assert_eq!(w.generation(), 1, "nor into the generation");
    }
}
