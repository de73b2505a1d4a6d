//! A stream's multishot op (a receive, or a listener's accept): armed, cancelled
//! and re-armed as what the stream wants changes; and the receive-size average
//! that picks between the provided-buffer pool and large receives.

/// The state of a connection's multishot op. Only its final completion (no
/// `IORING_CQE_F_MORE`) ends it; a cancel is a request that the final completion
/// answers.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum Arm {
    #[default]
    Off,
    On,
    /// A cancel was pushed; the final completion has not come yet.
    Cancelling,
}

/// A transition the state does not allow (the state is left as it was).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Illegal {
    pub from: Arm,
    pub to: Arm,
}

impl Arm {
    /// A multishot SQE was pushed: Off -> On.
    pub fn arm(&mut self) -> Result<(), Illegal> {
        self.go(Arm::Off, Arm::On)
    }

    /// A cancel was pushed: On -> Cancelling.
    pub fn cancel(&mut self) -> Result<(), Illegal> {
        self.go(Arm::On, Arm::Cancelling)
    }

    /// Its final completion arrived: On or Cancelling -> Off.
    pub fn finished(&mut self) -> Result<(), Illegal> {
        if *self == Arm::Off {
            return Err(Illegal {
                from: Arm::Off,
                to: Arm::Off,
            });
        }
        *self = Arm::Off;
        Ok(())
    }

    /// Its completions will never be seen (its ring was replaced): Off.
    pub fn forget(&mut self) {
        *self = Arm::Off;
    }

    /// An op may be in the kernel.
    pub fn in_kernel(self) -> bool {
        self != Arm::Off
    }

    fn go(&mut self, from: Arm, to: Arm) -> Result<(), Illegal> {
        if *self != from {
            return Err(Illegal { from: *self, to });
        }
        *self = to;
        Ok(())
    }
}

/// What to do with a connection's multishot op now.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Step<K> {
    /// Push a multishot op of kind `K`, then [`Arm::arm`].
    Arm(K),
    /// Push a cancel of the armed op, then [`Arm::cancel`]; the final completion
    /// makes it Off, and the next step arms again if still wanted.
    Cancel,
    /// Nothing: the armed op is the one wanted, a cancel is under way, or nothing
    /// is wanted (or may be armed now) and nothing is armed.
    Nothing,
}

/// The step from `state` (whose armed op, when not Off, is of kind `armed`) to
/// what is `wanted` (None: no multishot op). `may_arm`: an op may be armed now
/// (false while the connection waits for buffers). One op at a time: a change
/// of kind cancels first and arms after the final completion.
pub fn step<K: PartialEq + Copy>(
    state: Arm,
    armed: K,
    wanted: Option<K>,
    may_arm: bool,
) -> Step<K> {
    match (state, wanted) {
        (Arm::On, Some(k)) if k == armed => Step::Nothing,
        (Arm::On, _) => Step::Cancel,
        (Arm::Cancelling, _) => Step::Nothing,
        (Arm::Off, Some(k)) if may_arm => Step::Arm(k),
        (Arm::Off, _) => Step::Nothing,
    }
}

/// The bytes a stream receives per CQE batch, as a moving average over the
/// batches that brought data, and whether its receives should be large ones
/// (readiness, then a receive straight into a new buffer of its own) rather
/// than the provided-buffer pool's multishot receive.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReceiveSize {
    /// Bytes received in batch `batch`.
    acc: usize,
    batch: u64,
    /// The average (None before a batch with data has ended).
    avg: Option<usize>,
    large: bool,
}

/// Above this average a stream moves to large receives ...
pub const LARGE_ON: usize = 48 * 1024;
/// ... and below this one back to the pool.
pub const LARGE_OFF: usize = 16 * 1024;

impl ReceiveSize {
    /// Counts `n` bytes received in CQE batch `batch` (batches count up from 1).
    /// When a new batch starts, the previous one's bytes enter the average, which
    /// picks the receive kind (never large for `pool_only` streams). True when
    /// the pick changed.
    pub fn note(&mut self, n: usize, batch: u64, pool_only: bool) -> bool {
        let mut changed = false;
        if self.batch != batch {
            if self.batch != 0 {
                // The first batch with data starts the average (an average starting
                // at 0 would take a new connection of 100 KiB messages four batches
                // to move).
                let avg = self.avg.map_or(self.acc, |a| (a * 3 + self.acc) / 4);
                self.avg = Some(avg);
                let want = !pool_only && avg >= if self.large { LARGE_OFF } else { LARGE_ON };
                if want != self.large {
                    self.large = want;
                    changed = true;
                }
            }
            (self.acc, self.batch) = (0, batch);
        }
        self.acc += n;
        changed
    }

    /// Large receives from now on, the average raised to at least [`LARGE_ON`]
    /// (the pool ran dry while the stream filled whole buffers: its messages are
    /// large, but its starved receives cannot show it).
    pub fn force_large(&mut self) {
        self.large = true;
        self.avg = Some(self.avg.map_or(LARGE_ON, |a| a.max(LARGE_ON)));
    }

    pub fn large(&self) -> bool {
        self.large
    }
}

/// How many starved streams may re-arm their pool receive now: as many as
/// `available` buffers serve at `per_stream_x16` (the recent buffers one stream
/// took per batch, x16 fixed point), and at least one, so that every starved
/// stream gets its turn.
pub fn rearm_budget(available: usize, per_stream_x16: usize) -> usize {
    let per = per_stream_x16.div_ceil(16).max(1);
    (available / per).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arm_cancel_finish_is_the_only_cycle() {
        let mut a = Arm::Off;
        assert!(!a.in_kernel());
        a.arm().unwrap();
        assert!(a.in_kernel());
        a.cancel().unwrap();
        assert_eq!(a, Arm::Cancelling);
        assert!(
            a.in_kernel(),
            "a cancelled op is in the kernel until its last CQE"
        );
        a.finished().unwrap();
        assert_eq!(a, Arm::Off);
        a.arm().unwrap();
        a.finished().unwrap(); // ended by the kernel (EOF, ENOBUFS, an error)
        assert_eq!(a, Arm::Off);
    }

    #[test]
    fn illegal_transitions_are_refused_and_change_nothing() {
        let mut a = Arm::On;
        assert_eq!(
            a.arm(),
            Err(Illegal {
                from: Arm::On,
                to: Arm::On
            }),
            "two multishots at once"
        );
        a.cancel().unwrap();
        assert_eq!(
            a.cancel(),
            Err(Illegal {
                from: Arm::Cancelling,
                to: Arm::Cancelling
            })
        );
        assert!(a.arm().is_err(), "re-armed before the final completion");
        assert_eq!(a, Arm::Cancelling);
        let mut off = Arm::Off;
        assert!(off.cancel().is_err(), "nothing to cancel");
        assert!(off.finished().is_err(), "a final completion of nothing");
        assert_eq!(off, Arm::Off);
    }

    #[test]
    fn forget_drops_an_op_whose_completions_never_come() {
        for mut a in [Arm::Off, Arm::On, Arm::Cancelling] {
            a.forget();
            assert_eq!(a, Arm::Off);
        }
    }

    #[test]
    fn step_arms_keeps_or_cancels() {
        // Off: arm what is wanted when it may be armed.
        assert_eq!(step(Arm::Off, false, Some(true), true), Step::Arm(true));
        assert_eq!(step(Arm::Off, false, Some(false), false), Step::Nothing);
        assert_eq!(step(Arm::Off, false, None::<bool>, true), Step::Nothing);
        // On: keep the op that is wanted; cancel one that is not, or of the
        // other kind (it is re-armed after its final completion).
        assert_eq!(step(Arm::On, true, Some(true), true), Step::Nothing);
        assert_eq!(step(Arm::On, true, None, true), Step::Cancel);
        assert_eq!(step(Arm::On, true, Some(false), true), Step::Cancel);
        // Cancelling: wait for the final completion, whatever is wanted.
        assert_eq!(step(Arm::Cancelling, true, Some(true), true), Step::Nothing);
        assert_eq!(step(Arm::Cancelling, true, None, true), Step::Nothing);
    }

    #[test]
    fn a_change_of_kind_goes_through_off() {
        let (mut state, mut armed) = (Arm::Off, false);
        let mut trace = Vec::new();
        let wanted = Some(true);
        for _ in 0..4 {
            match step(state, armed, wanted, true) {
                Step::Arm(k) => {
                    state.arm().unwrap();
                    armed = k;
                    trace.push("arm");
                }
                Step::Cancel => {
                    state.cancel().unwrap();
                    trace.push("cancel");
                }
                Step::Nothing if state == Arm::Cancelling => {
                    state.finished().unwrap();
                    trace.push("final");
                }
                Step::Nothing => trace.push("keep"),
            }
            if trace == ["arm"] {
                // Armed with the first kind; then the other one is wanted.
                armed = false;
            }
        }
        assert_eq!(trace, ["arm", "cancel", "final", "arm"]);
        assert_eq!((state, armed), (Arm::On, true));
    }

    #[test]
    fn receive_size_moves_with_hysteresis() {
        let mut s = ReceiveSize::default();
        // Batch 1 brings 64 KiB: counted when batch 2 starts.
        assert!(!s.note(64 * 1024, 1, false));
        assert!(!s.large());
        assert!(
            s.note(10, 2, false),
            "the first batch's bytes start the average"
        );
        assert!(s.large());
        // Between LARGE_OFF and LARGE_ON it stays large...
        let mut batch = 3;
        for _ in 0..20 {
            s.note(20 * 1024, batch, false);
            batch += 1;
        }
        assert!(s.large());
        // ... and moves back below LARGE_OFF.
        let mut moved = false;
        for _ in 0..20 {
            moved |= s.note(1024, batch, false);
            batch += 1;
        }
        assert!(moved && !s.large());
        // Between the two marks, a small stream stays small.
        for _ in 0..20 {
            s.note(20 * 1024, batch, false);
            batch += 1;
        }
        assert!(!s.large());
    }

    #[test]
    fn several_receives_of_one_batch_count_together() {
        let mut s = ReceiveSize::default();
        for _ in 0..4 {
            s.note(16 * 1024, 1, false);
        }
        assert!(
            s.note(1, 2, false),
            "4 x 16 KiB in one batch is a 64 KiB batch"
        );
    }

    #[test]
    fn pool_only_streams_never_go_large() {
        let mut s = ReceiveSize::default();
        s.note(1 << 20, 1, true);
        assert!(!s.note(1 << 20, 2, true));
        assert!(!s.large());
    }

    #[test]
    fn force_large_raises_the_average() {
        let mut s = ReceiveSize::default();
        s.force_large();
        assert!(s.large());
        assert_eq!(s.avg, Some(LARGE_ON));
        s.note(1024, 1, false);
        assert!(
            !s.note(1024, 2, false),
            "the raised average keeps it large a while"
        );
        assert!(s.large());
    }

    #[test]
    fn rearm_budget_is_at_least_one() {
        assert_eq!(rearm_budget(0, 16), 1);
        assert_eq!(rearm_budget(100, 16), 100);
        assert_eq!(rearm_budget(100, 4 * 16), 25);
        assert_eq!(
            rearm_budget(100, 17),
            50,
            "2 buffers per stream (rounded up)"
        );
        assert_eq!(rearm_budget(7, 0), 7);
    }
}
