//! The loop's timer heap (`loop._scheduled`), pushed and popped as `heapq` does,
//! with `TimerHandle.__lt__` done natively.
//!
//! `heapq` orders the heap with `<`, which for two `TimerHandle`s is a Python
//! method (`self._when < other._when`): a frame per comparison, a dozen per pop
//! of a heap of a few hundred timers (a server arms one per connection). These are
//! `heapq`'s own algorithms (`_siftdown`, `_siftup`, `heappush`, `heappop` of
//! CPython's `_heapqmodule.c`), step for step, so the heap holds its timers in the
//! very positions `heapq` would put them; only a comparison of two instances of
//! `TimerHandle` itself reads their `_when` slots and compares those. Any other
//! pair is compared with `<`, as `heapq` does.

use pyo3::exceptions::{PyIndexError, PyRuntimeError};
use pyo3::prelude::*;
use pyo3::types::PyList;

use super::handles::HandleSlots;

/// `a < b` as `heapq` evaluates it between two heap entries.
fn less(slots: &HandleSlots, a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> PyResult<bool> {
    if slots.is_timer(a) && slots.is_timer(b) {
        // TimerHandle.__lt__: `self._when < other._when`.
        slots.when(a)?.lt(slots.when(b)?)
    } else {
        a.lt(b)
    }
}

fn check_size(heap: &Bound<'_, PyList>, size: usize) -> PyResult<()> {
    if heap.len() != size {
        return Err(PyRuntimeError::new_err(
            "list changed size during iteration",
        ));
    }
    Ok(())
}

/// `heapq._siftdown(heap, startpos, pos)`: the entry at `pos` moves up past its
/// larger parents.
fn sift_down(
    slots: &HandleSlots,
    heap: &Bound<'_, PyList>,
    start: usize,
    mut pos: usize,
) -> PyResult<()> {
    let size = heap.len();
    let new_item = heap.get_item(pos)?;
    while pos > start {
        let parent_pos = (pos - 1) >> 1;
        let parent = heap.get_item(parent_pos)?;
        let moved = less(slots, &new_item, &parent)?;
        check_size(heap, size)?;
        if !moved {
            break;
        }
        // heapq swaps the two entries (it reads them again after the comparison,
        // which may have run Python code).
        let parent = heap.get_item(parent_pos)?;
        let item = heap.get_item(pos)?;
        heap.set_item(parent_pos, item)?;
        heap.set_item(pos, parent)?;
        pos = parent_pos;
    }
    Ok(())
}

/// `heapq._siftup(heap, pos)`: the smaller child moves up until a leaf, then
/// the entry that was at `pos` sifts down from there.
fn sift_up(slots: &HandleSlots, heap: &Bound<'_, PyList>, mut pos: usize) -> PyResult<()> {
    let end = heap.len();
    let start = pos;
    let limit = end >> 1;
    while pos < limit {
        let mut child = 2 * pos + 1;
        if child + 1 < end {
            let a = heap.get_item(child)?;
            let b = heap.get_item(child + 1)?;
            let left_smaller = less(slots, &a, &b)?;
            check_size(heap, end)?;
            if !left_smaller {
                child += 1;
            }
        }
        let smaller = heap.get_item(child)?;
        let item = heap.get_item(pos)?;
        heap.set_item(child, item)?;
        heap.set_item(pos, smaller)?;
        pos = child;
    }
    sift_down(slots, heap, start, pos)
}

/// `heapq.heappush(heap, item)`.
pub(super) fn push(
    slots: &HandleSlots,
    heap: &Bound<'_, PyList>,
    item: &Bound<'_, PyAny>,
) -> PyResult<()> {
    heap.append(item)?;
    sift_down(slots, heap, 0, heap.len() - 1)
}

/// `heapq.heappop(heap)`.
pub(super) fn pop<'py>(
    slots: &HandleSlots,
    heap: &Bound<'py, PyList>,
) -> PyResult<Bound<'py, PyAny>> {
    let n = heap.len();
    if n == 0 {
        return Err(PyIndexError::new_err("index out of range"));
    }
    let last = heap.get_item(n - 1)?;
    heap.del_item(n - 1)?;
    if n == 1 {
        return Ok(last);
    }
    let first = heap.get_item(0)?;
    heap.set_item(0, last)?;
    sift_up(slots, heap, 0)?;
    Ok(first)
}
