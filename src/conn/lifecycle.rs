//! A stream transport's life, as asyncio's transports have it: open; closing
//! (close() was called, the queue still drains); lost (connection_lost is due or
//! scheduled: nothing more is delivered, writes are dropped); released (the
//! transport is gone, its slot waits only for the kernel's last completions).
//! It only moves forward.

#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum Lifecycle {
    #[default]
    Open,
    /// close() with data queued: connection_lost follows the last send.
    Closing,
    /// connection_lost is due (close() with an empty queue, the queue drained
    /// after close(), abort(), a fatal error).
    Lost,
    /// connection_lost ran and the transport let go of its slot.
    Released,
}

impl Lifecycle {
    /// close(): Open -> Closing, or straight to Lost when nothing is queued.
    /// A transport already lost or released stays so.
    pub fn close(&mut self, queue_empty: bool) {
        if *self == Lifecycle::Open || *self == Lifecycle::Closing {
            *self = if queue_empty {
                Lifecycle::Lost
            } else {
                Lifecycle::Closing
            };
        }
    }

    /// The queue of a closing transport drained: Closing -> Lost. True when it
    /// did (connection_lost is now due); false in any other state.
    pub fn drained(&mut self) -> bool {
        if *self != Lifecycle::Closing {
            return false;
        }
        *self = Lifecycle::Lost;
        true
    }

    /// abort() or a fatal error: Open or Closing -> Lost.
    pub fn lose(&mut self) {
        if *self != Lifecycle::Released {
            *self = Lifecycle::Lost;
        }
    }

    /// The transport is gone: any state -> Released.
    pub fn release(&mut self) {
        *self = Lifecycle::Released;
    }

    /// Data, EOF and errors are still delivered; writes are queued.
    pub fn is_live(self) -> bool {
        matches!(self, Lifecycle::Open | Lifecycle::Closing)
    }

    pub fn is_closing(self) -> bool {
        self == Lifecycle::Closing
    }

    pub fn is_released(self) -> bool {
        self == Lifecycle::Released
    }
}

#[cfg(test)]
mod tests {
    use super::Lifecycle::{self, *};

    const ALL: [Lifecycle; 4] = [Open, Closing, Lost, Released];

    fn rank(l: Lifecycle) -> u8 {
        l as u8
    }

    #[test]
    fn close_drains_then_loses() {
        let mut l = Open;
        l.close(false);
        assert_eq!(l, Closing);
        assert!(l.is_live(), "a closing transport still sends and receives");
        assert!(l.drained());
        assert_eq!(l, Lost);
        assert!(!l.is_live());
        l.release();
        assert!(l.is_released());
    }

    #[test]
    fn close_with_nothing_queued_is_lost_at_once() {
        let mut l = Open;
        l.close(true);
        assert_eq!(l, Lost);
        assert!(!l.drained(), "connection_lost is not due twice");
    }

    #[test]
    fn abort_loses_from_open_and_closing() {
        for start in [Open, Closing] {
            let mut l = start;
            l.lose();
            assert_eq!(l, Lost);
        }
    }

    #[test]
    fn drained_is_refused_unless_closing() {
        for start in [Open, Lost, Released] {
            let mut l = start;
            assert!(!l.drained());
            assert_eq!(l, start);
        }
    }

    #[test]
    fn it_never_moves_backwards() {
        for start in ALL {
            for op in 0..5 {
                let mut l = start;
                match op {
                    0 => l.close(false),
                    1 => l.close(true),
                    2 => {
                        l.drained();
                    }
                    3 => l.lose(),
                    _ => l.release(),
                }
                assert!(rank(l) >= rank(start), "{start:?} --op {op}--> {l:?}");
            }
        }
    }

    #[test]
    fn released_is_final() {
        let mut l = Released;
        l.close(true);
        l.close(false);
        l.drained();
        l.lose();
        assert_eq!(l, Released);
    }
}
