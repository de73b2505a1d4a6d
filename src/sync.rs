//! Locks that outlive a panic: every critical section of ringio leaves its data
//! consistent, so a poisoned mutex is taken as it is.

use std::sync::{Mutex, MutexGuard, TryLockError};

pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section leaves the data consistent, so poisoning is harmless.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// `lock`, if no one holds the mutex (for what must not wait for it: the GC's
/// slots, and the checks a `Drop` run by the GC makes).
pub fn try_lock<T>(m: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match m.try_lock() {
        Ok(g) => Some(g),
        Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}
