//! Handing each CQE to its owner: the one completion router of a ring that several
//! clients share.
//!
//! The router reads a CQE's owner from its user_data (`super::owner`), counts the
//! owner's op as done when the CQE is final (a multishot's CQEs with `MORE` are
//! not), and gives the CQE to that owner's sink. The counts are what a shutdown
//! waits for: the kernel may write into a client's buffers until the final CQE of
//! each of its ops has arrived.
//!
//! The file Driver's ops are not counted here: the Driver keeps its own table of
//! in-flight ops (the buffers each holds), which the kernel AIO engine shares.

use io_uring::cqueue;

use super::owner::Owner;

/// One CQE, as the router hands it to its owner's sink.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// Its user_data as the kernel returned it (owner bits included).
    pub user_data: u64,
    pub res: i32,
    pub flags: u32,
}

impl From<cqueue::Entry> for Completion {
    #[inline]
    fn from(cqe: cqueue::Entry) -> Self {
        Completion {
            user_data: cqe.user_data(),
            res: cqe.result(),
            flags: cqe.flags(),
        }
    }
}

impl Completion {
    /// Whether more CQEs of the same op will follow (a multishot still armed).
    #[inline]
    pub fn more(&self) -> bool {
        cqueue::more(self.flags)
    }
}

/// Whether a sink takes more completions in this reap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Take {
    More,
    /// The sink is full: routing stops, and the CQEs after this one stay in the
    /// CQ for the next reap.
    Enough,
}

/// Where one owner's completions go.
pub trait CompletionSink {
    fn take(&mut self, completion: Completion) -> Take;
}

/// The sinks of a ring's owners.
pub trait Sinks {
    /// The sink of `owner`'s completions; `None` when the owner is gone, and its
    /// completions are only counted.
    fn sink_of(&mut self, owner: Owner) -> Option<&mut dyn CompletionSink>;
}

/// A client whose ops the router counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counted {
    LoopCore,
    /// A loop-bound Watcher, by id.
    Watcher(u16),
}

impl Counted {
    fn of(owner: Owner) -> Option<Counted> {
        match owner {
            Owner::LoopCore(_) => Some(Counted::LoopCore),
            Owner::Watcher { id, .. } => Some(Counted::Watcher(id)),
            Owner::Driver(_) | Owner::Internal => None,
        }
    }
}

/// Routes CQEs to sinks and counts, per client, the ops whose final CQE has not
/// arrived.
#[derive(Debug, Default)]
pub struct Router {
    loop_core: usize,
    /// Indexed by Watcher id.
    watchers: Vec<usize>,
}

impl Router {
    pub fn new() -> Self {
        Self::default()
    }

    fn count_mut(&mut self, client: Counted) -> &mut usize {
        match client {
            Counted::LoopCore => &mut self.loop_core,
            Counted::Watcher(id) => {
                let i = usize::from(id);
                if self.watchers.len() <= i {
                    self.watchers.resize(i + 1, 0);
                }
                &mut self.watchers[i]
            }
        }
    }

    /// `n` ops of `client` went to the SQ; each will end with one final CQE.
    /// (Cancellations carry `Owner::Internal` and are never counted.)
    pub fn submitted(&mut self, client: Counted, n: usize) {
        *self.count_mut(client) += n;
    }

    /// Ops of `client` whose final CQE has not arrived.
    pub fn in_flight(&self, client: Counted) -> usize {
        match client {
            Counted::LoopCore => self.loop_core,
            Counted::Watcher(id) => self.watchers.get(usize::from(id)).copied().unwrap_or(0),
        }
    }

    /// Ops of every loop-bound Watcher whose final CQE has not arrived.
    pub fn watchers_in_flight(&self) -> usize {
        self.watchers.iter().sum()
    }

    /// Ops of every counted client whose final CQE has not arrived.
    pub fn total_in_flight(&self) -> usize {
        self.loop_core + self.watchers_in_flight()
    }

    /// Hands each completion to its owner's sink, in CQ order, until `cq` ends or
    /// a sink says `Enough` (then the rest stay in the CQ for the next reap).
    /// Internal completions (cancellations') are dropped.
    pub fn route<I, S>(&mut self, cq: I, sinks: &mut S) -> Take
    where
        I: IntoIterator<Item = Completion>,
        S: Sinks + ?Sized,
    {
        for completion in cq {
            if self.settle(completion, sinks) == Take::Enough {
                return Take::Enough;
            }
        }
        Take::More
    }

    /// Counts and delivers one completion (the body of `route`, for one CQE).
    pub fn settle<S: Sinks + ?Sized>(&mut self, completion: Completion, sinks: &mut S) -> Take {
        let owner = Owner::decode(completion.user_data);
        if owner == Owner::Internal {
            return Take::More;
        }
        if let Some(client) = Counted::of(owner) {
            if !completion.more() {
                let count = self.count_mut(client);
                debug_assert!(*count > 0, "a final CQE of {client:?} beyond its ops");
                *count = count.saturating_sub(1);
            }
        }
        match sinks.sink_of(owner) {
            Some(sink) => sink.take(completion),
            None => Take::More,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// IORING_CQE_F_MORE (include/uapi/linux/io_uring.h).
    const MORE: u32 = 1 << 1;

    /// Every owner's completions, by kind; the Driver's sink is full after `limit`.
    #[derive(Default)]
    struct Recorded {
        driver: Vec<Completion>,
        core: Vec<Completion>,
        watcher: Vec<(u16, Completion)>,
        gone: Option<u16>,
        limit: usize,
    }
    struct DriverSink<'a>(&'a mut Vec<Completion>, usize);
    impl CompletionSink for DriverSink<'_> {
        fn take(&mut self, c: Completion) -> Take {
            self.0.push(c);
            if self.0.len() >= self.1 {
                Take::Enough
            } else {
                Take::More
            }
        }
    }
    impl CompletionSink for Vec<Completion> {
        fn take(&mut self, c: Completion) -> Take {
            self.push(c);
            Take::More
        }
    }
    struct WatcherSink<'a>(&'a mut Vec<(u16, Completion)>, u16);
    impl CompletionSink for WatcherSink<'_> {
        fn take(&mut self, c: Completion) -> Take {
            self.0.push((self.1, c));
            Take::More
        }
    }
    struct Table<'a> {
        r: &'a mut Recorded,
        driver: Option<DriverSink<'a>>,
        watcher: Option<WatcherSink<'a>>,
    }
    impl Sinks for Recorded {
        fn sink_of(&mut self, owner: Owner) -> Option<&mut dyn CompletionSink> {
            match owner {
                Owner::LoopCore(_) => Some(&mut self.core),
                Owner::Driver(_) | Owner::Watcher { .. } | Owner::Internal => None,
            }
        }
    }
    impl Sinks for Table<'_> {
        fn sink_of(&mut self, owner: Owner) -> Option<&mut dyn CompletionSink> {
            match owner {
                Owner::Driver(_) => self.driver.as_mut().map(|s| s as &mut dyn CompletionSink),
                Owner::LoopCore(_) => Some(&mut self.r.core),
                Owner::Watcher { id, .. } if Some(id) == self.r.gone => None,
                Owner::Watcher { id, .. } => {
                    let s = self.watcher.as_mut()?;
                    s.1 = id;
                    Some(s)
                }
                Owner::Internal => None,
            }
        }
    }

    fn cqe(owner: Owner, res: i32, flags: u32) -> Completion {
        Completion {
            user_data: owner.encode(),
            res,
            flags,
        }
    }

    /// Routes `cqes` with a Driver sink full after `r.limit` completions.
    fn route_all(router: &mut Router, r: &mut Recorded, cqes: &[Completion]) -> Take {
        let mut driver = std::mem::take(&mut r.driver);
        let mut watcher = std::mem::take(&mut r.watcher);
        let limit = r.limit;
        let take = {
            let mut table = Table {
                r,
                driver: Some(DriverSink(&mut driver, limit)),
                watcher: Some(WatcherSink(&mut watcher, 0)),
            };
            router.route(cqes.iter().copied(), &mut table)
        };
        r.driver = driver;
        r.watcher = watcher;
        take
    }

    #[test]
    fn each_completion_reaches_its_owner_in_order() {
        let mut router = Router::new();
        router.submitted(Counted::LoopCore, 2);
        router.submitted(Counted::Watcher(3), 1);
        let mut r = Recorded {
            limit: usize::MAX,
            ..Default::default()
        };
        let cqes = [
            cqe(Owner::Driver(7), 4096, 0),
            cqe(Owner::LoopCore(11), 1, 0),
            cqe(Owner::Internal, -libc::ENOENT, 0),
            cqe(Owner::Watcher { id: 3, payload: 5 }, 10, 0),
            cqe(Owner::LoopCore(12), 2, 0),
        ];
        route_all(&mut router, &mut r, &cqes);
        assert_eq!(r.driver, vec![cqes[0]]);
        assert_eq!(r.core, vec![cqes[1], cqes[4]]);
        assert_eq!(r.watcher, vec![(3, cqes[3])]);
        assert_eq!(router.total_in_flight(), 0);
    }

    #[test]
    fn a_multishot_counts_once_at_its_final_completion() {
        let mut router = Router::new();
        router.submitted(Counted::LoopCore, 1);
        router.submitted(Counted::Watcher(2), 1);
        let mut r = Recorded {
            limit: usize::MAX,
            ..Default::default()
        };
        let core = Owner::LoopCore(1);
        let watcher = Owner::Watcher { id: 2, payload: 9 };
        route_all(
            &mut router,
            &mut r,
            &[
                cqe(core, 100, MORE),
                cqe(watcher, 50, MORE),
                cqe(core, 100, MORE),
            ],
        );
        assert_eq!(router.in_flight(Counted::LoopCore), 1);
        assert_eq!(router.in_flight(Counted::Watcher(2)), 1);
        route_all(&mut router, &mut r, &[cqe(core, -libc::ENOBUFS, 0)]);
        assert_eq!(router.in_flight(Counted::LoopCore), 0);
        assert_eq!(router.in_flight(Counted::Watcher(2)), 1);
        route_all(&mut router, &mut r, &[cqe(watcher, 0, 0)]);
        assert_eq!(router.watchers_in_flight(), 0);
        assert_eq!(r.core.len(), 3);
        assert_eq!(r.watcher.len(), 2);
    }

    #[test]
    fn a_full_sink_stops_the_round_after_its_completion() {
        let mut router = Router::new();
        router.submitted(Counted::LoopCore, 1);
        let mut r = Recorded {
            limit: 2,
            ..Default::default()
        };
        let cqes = [
            cqe(Owner::Driver(1), 0, 0),
            cqe(Owner::Driver(2), 0, 0),
            cqe(Owner::LoopCore(3), 0, 0),
        ];
        let take = route_all(&mut router, &mut r, &cqes);
        assert_eq!(take, Take::Enough, "the second Driver CQE filled the sink");
        assert_eq!(r.driver.len(), 2);
        assert!(
            r.core.is_empty(),
            "the CQE after a full sink stays for the next reap"
        );
        assert_eq!(router.in_flight(Counted::LoopCore), 1);
    }

    #[test]
    fn a_gone_owner_is_counted_but_not_delivered() {
        let mut router = Router::new();
        router.submitted(Counted::Watcher(4), 2);
        let mut r = Recorded {
            limit: usize::MAX,
            gone: Some(4),
            ..Default::default()
        };
        let w = Owner::Watcher { id: 4, payload: 1 };
        route_all(
            &mut router,
            &mut r,
            &[cqe(w, 0, 0), cqe(w, -libc::ECANCELED, 0)],
        );
        assert!(r.watcher.is_empty());
        assert_eq!(router.in_flight(Counted::Watcher(4)), 0);
    }

    #[test]
    fn sinks_may_be_any_table() {
        // The loop core alone (no Driver, no Watchers): the others' CQEs are dropped.
        let mut router = Router::new();
        router.submitted(Counted::LoopCore, 1);
        let mut r = Recorded::default();
        let c = cqe(Owner::LoopCore(5), 3, 0);
        assert_eq!(
            router.settle(cqe(Owner::Driver(1), 0, 0), &mut r),
            Take::More
        );
        assert_eq!(router.settle(c, &mut r), Take::More);
        assert_eq!(r.core, vec![c]);
        assert_eq!(router.total_in_flight(), 0);
    }
}
