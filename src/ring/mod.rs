//! The io_uring layer: what every client of a ring shares, knowing nothing of the
//! clients (the file Driver in `crate::uring`, the loop core, the Watcher).
//!
//! - `setup`: the one ladder of setup flags, and the opcode probe;
//! - `enter`: io_uring_enter;
//! - `regring`: a ring fd registered with the thread that enters it;
//! - `bufring`: a provided-buffer ring and the memory behind it;
//! - `files`: the fixed-file table;
//! - `prep`: the SQEs more than one client builds, one function per operation;
//! - `submit`: the one place an SQE is pushed, and what a pusher promises;
//! - `owner`: the user_data codec, which says whose a completion is;
//! - `route`: the completion router, which hands each CQE to its owner's sink and
//!   counts each client's ops in flight.
//!
//! Nothing here imports another module of the crate but `sys`.

pub mod bufring;
pub mod enter;
pub mod files;
pub mod owner;
pub mod prep;
pub mod regring;
pub mod route;
pub mod setup;
pub mod submit;
