//! The state machines of a stream connection, shared by the event loop's
//! transports (`loopcore`) and the Watcher's connections (`net`), with no Python
//! in them:
//!
//! * [`send::SendQueue`]: writes queued (small ones coalesced, large ones kept by
//!   reference), one send in flight over the head of the queue, partial sends
//!   advancing across chunks;
//! * [`recv`]: the multishot op's arming, cancelling and re-arming ([`recv::Arm`],
//!   [`recv::step`]), the receive-size average that picks the buffer kind, and
//!   how many streams that waited for buffers may re-arm;
//! * [`lifecycle::Lifecycle`]: open -> closing -> lost -> released.

pub mod lifecycle;
pub mod recv;
pub mod send;
