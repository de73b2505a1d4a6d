//! Who a completion belongs to: the one user_data codec of a ring that several
//! clients share.
//!
//! On a `ringio.EventLoop` one ring carries the file Driver's ops, the loop core's
//! (its stream transports'), and those of every loop-bound Watcher; the reaper
//! routes each CQE by the top bits of its user_data:
//!
//! | user_data | owner | the owner's own bits |
//! |---|---|---|
//! | `u64::MAX` | nobody: the clients' own cancellations | none |
//! | bit 63 clear | the file Driver | its token (1 and up), bits 0..63 |
//! | bits 63..62 = `10` | the loop core | bits 0..62 |
//! | bits 63..62 = `11` | a loop-bound Watcher | its id in bits 50..62 (1 to 0xffe), bits 0..50 |
//!
//! A Watcher's id is never 0xfff, so no Watcher's user_data is `u64::MAX`; the loop
//! core's never has bit 62 set, so it is never a Watcher's.

/// user_data of SQEs whose CQEs concern no op (asynchronous cancellations).
pub const INTERNAL: u64 = u64::MAX;
const CORE_MARK: u64 = 1 << 63;
const WATCHER_MARK: u64 = 3 << 62;
const WATCHER_SHIFT: u32 = 50;
/// The bits of its own a loop-bound Watcher's user_data carries.
pub const WATCHER_PAYLOAD: u64 = (1 << WATCHER_SHIFT) - 1;
/// The bits of its own the loop core's user_data carries.
pub const CORE_PAYLOAD: u64 = (1 << 62) - 1;
/// Loop-bound Watcher ids are 1 to this (12 bits, 0xfff excluded).
pub const MAX_WATCHER_ID: u16 = 0xffe;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owner {
    /// A cancellation's CQE: no op's.
    Internal,
    /// A file op of the Driver, by its token (below 2^63).
    Driver(u64),
    /// The loop core's: its own 62 bits.
    LoopCore(u64),
    /// A loop-bound Watcher's: its id and its own 50 bits.
    Watcher { id: u16, payload: u64 },
}

impl Owner {
    /// The user_data that routes a CQE back to this owner. Each field must fit its
    /// bits (checked in debug builds): a wider one would be taken for another owner.
    #[inline]
    pub fn encode(self) -> u64 {
        match self {
            Owner::Internal => INTERNAL,
            Owner::Driver(token) => {
                debug_assert!(token < CORE_MARK, "a Driver token reaches bit 63");
                token
            }
            Owner::LoopCore(payload) => {
                debug_assert!(payload <= CORE_PAYLOAD, "the loop core's bits reach bit 62");
                CORE_MARK | payload
            }
            Owner::Watcher { id, payload } => {
                debug_assert!((1..=MAX_WATCHER_ID).contains(&id), "Watcher id {id}");
                debug_assert!(payload <= WATCHER_PAYLOAD, "a Watcher's bits reach bit 50");
                WATCHER_MARK | (u64::from(id) << WATCHER_SHIFT) | payload
            }
        }
    }

    /// The owner of a CQE with this user_data.
    #[inline]
    pub fn decode(user_data: u64) -> Owner {
        if user_data == INTERNAL {
            Owner::Internal
        } else if user_data & WATCHER_MARK == WATCHER_MARK {
            Owner::Watcher {
                id: ((user_data >> WATCHER_SHIFT) & 0xfff) as u16,
                payload: user_data & WATCHER_PAYLOAD,
            }
        } else if user_data & CORE_MARK != 0 {
            Owner::LoopCore(user_data & CORE_PAYLOAD)
        } else {
            Owner::Driver(user_data)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every owner at the limits of its fields (and between them).
    fn samples() -> Vec<Owner> {
        let mut all = vec![Owner::Internal];
        for token in [1, 2, 0xffff_ffff, CORE_MARK - 1] {
            all.push(Owner::Driver(token));
        }
        for payload in [0, 1, 0x3fff_ffff, 1 << 61, CORE_PAYLOAD] {
            all.push(Owner::LoopCore(payload));
        }
        for id in [1, 2, 0x800, MAX_WATCHER_ID] {
            for payload in [0, 3, 1 << 49, WATCHER_PAYLOAD] {
                all.push(Owner::Watcher { id, payload });
            }
        }
        all
    }

    #[test]
    fn decoding_gives_back_every_field() {
        for owner in samples() {
            assert_eq!(Owner::decode(owner.encode()), owner, "{owner:?}");
        }
    }

    #[test]
    fn no_two_owners_share_a_user_data() {
        let all = samples();
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                assert_ne!(a.encode(), b.encode(), "{a:?} and {b:?}");
            }
        }
    }

    #[test]
    fn only_a_cancellation_is_internal() {
        // The widest Watcher and loop-core user_data stay below u64::MAX.
        let widest_watcher = Owner::Watcher {
            id: MAX_WATCHER_ID,
            payload: WATCHER_PAYLOAD,
        };
        assert_ne!(widest_watcher.encode(), INTERNAL);
        assert_ne!(Owner::LoopCore(CORE_PAYLOAD).encode(), INTERNAL);
        assert_eq!(Owner::decode(INTERNAL), Owner::Internal);
    }

    #[test]
    fn the_owner_is_read_from_the_top_bits_alone() {
        // Whatever a client puts in its own bits, the CQE comes back to it.
        assert!(matches!(
            Owner::decode(CORE_MARK | CORE_PAYLOAD),
            Owner::LoopCore(_)
        ));
        assert!(matches!(Owner::decode(CORE_MARK), Owner::LoopCore(0)));
        assert!(matches!(
            Owner::decode(WATCHER_MARK | (7 << WATCHER_SHIFT)),
            Owner::Watcher { id: 7, payload: 0 }
        ));
        assert!(matches!(Owner::decode(CORE_MARK - 1), Owner::Driver(_)));
    }
}
