//! ringio's native core: kernel I/O engines and the buffers they borrow from Python.
//!
//! One module per concern; `tests/test_layers.py` states their layers and checks
//! that none imports upward. docs/architecture.md draws them.

// Every `unsafe` block states the invariant that makes it sound (`make lint` denies
// warnings, so a block without its `// SAFETY:` comment fails CI).
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod aio;
pub mod buffers;
pub mod conn;
pub mod engine;
pub mod errors;
pub mod fastpath;
pub mod inline_read;
pub mod lines;
pub mod loopcore;
pub mod net;
pub mod op;
pub mod pydriver;
pub mod pytype;
pub mod ready;
pub mod ready_future;
pub mod ring;
pub mod started;
pub mod sync;
pub mod sys;
pub mod uring;

use pyo3::prelude::*;

/// O_DIRECT alignment for an open fd, from statx(STATX_DIOALIGN): (memory, offset),
/// or None where the kernel or filesystem does not report it. An fd that is not
/// open raises OSError(EBADF), as os.fstat does, rather than reading as "no
/// alignment known".
#[pyfunction]
fn dio_alignment(py: Python<'_>, fd: i32) -> PyResult<Option<(u32, u32)>> {
    if let Some(a) = sys::dio_alignment(fd) {
        return Ok(Some((a.memory, a.offset)));
    }
    // SAFETY: F_GETFD takes no pointer argument; it only asks whether `fd` is open.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        let errno = std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EBADF);
        return Err(errors::os_error(py, errno, Some(fd), None));
    }
    Ok(None)
}

/// The filesystem type of an open fd (`statfs.f_type`, e.g. 0x65735546 for FUSE).
#[pyfunction]
fn fs_type(py: Python<'_>, fd: i32) -> PyResult<i64> {
    sys::fs_type(fd).map_err(|errno| errors::os_error(py, errno, Some(fd), None))
}

/// io_uring_enter calls the process made through ringio's wait path (tests).
#[pyfunction]
fn _enter_count() -> u64 {
    ring::enter::enter_count()
}

/// Kernel AIO contexts this process keeps for its next engines (tests; see
/// `aio::spare_count`).
#[pyfunction]
fn _aio_spare_count() -> usize {
    aio::spare_count()
}

/// Adds `ringio._core.NAME`, filled in by `fill`, and registers it in `sys.modules`
/// so that `import ringio._core.NAME` and `from ringio._core.NAME import X` find it
/// (an extension module's submodules are attributes, not packages, otherwise).
fn add_submodule(
    parent: &Bound<'_, PyModule>,
    name: &str,
    fill: impl FnOnce(&Bound<'_, PyModule>) -> PyResult<()>,
) -> PyResult<()> {
    let py = parent.py();
    let qualified = format!("ringio._core.{name}");
    let sub = PyModule::new(py, &qualified)?;
    fill(&sub)?;
    parent.add(name, &sub)?;
    py.import("sys")?
        .getattr("modules")?
        .set_item(qualified, &sub)?;
    Ok(())
}

/// The io_uring file ring (`ringio.uring`'s engine) and the kernel's opcode probe.
fn fill_uring(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<pydriver::ring::Ring>()?;
    m.add_function(wrap_pyfunction!(pydriver::ring::probe, m)?)?;
    m.add("STAGE_FULL", pydriver::ring::STAGE_FULL)?;
    m.add("STAGE_WAITING", pydriver::ring::STAGE_WAITING)?;
    m.add("STAGE_SUBMITTED", pydriver::ring::STAGE_SUBMITTED)?;
    Ok(())
}

/// The kernel AIO context (`ringio.aio`'s engine), its probe and the iocb ABI.
fn fill_aio(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<pydriver::aio_context::AioContext>()?;
    m.add_function(wrap_pyfunction!(pydriver::aio_context::probe, m)?)?;
    for (name, value) in [
        ("IOCB_CMD_PREAD", aio::abi::IOCB_CMD_PREAD),
        ("IOCB_CMD_PWRITE", aio::abi::IOCB_CMD_PWRITE),
        ("IOCB_CMD_FSYNC", aio::abi::IOCB_CMD_FSYNC),
        ("IOCB_CMD_FDSYNC", aio::abi::IOCB_CMD_FDSYNC),
        ("IOCB_CMD_POLL", aio::abi::IOCB_CMD_POLL),
        ("IOCB_CMD_NOOP", aio::abi::IOCB_CMD_NOOP),
        ("IOCB_CMD_PREADV", aio::abi::IOCB_CMD_PREADV),
        ("IOCB_CMD_PWRITEV", aio::abi::IOCB_CMD_PWRITEV),
    ] {
        m.add(name, value)?;
    }
    m.add("IOCB_FLAG_RESFD", aio::abi::IOCB_FLAG_RESFD)?;
    m.add("IOCB_FLAG_IOPRIO", aio::abi::IOCB_FLAG_IOPRIO)?;
    Ok(())
}

/// The module `ringio._core`. Its submodules hold each engine and client of a ring:
/// `uring` (the file ring), `aio` (kernel AIO), `loop` (the event loop's native
/// core and transport writer), `net` (the Watcher). What every area shares stays at
/// the top: ops and completions, the file-op functions, lines, aligned buffers.
///
/// `gil_used = true`: on a free-threaded CPython (3.13t/3.14t) importing the module
/// re-enables the GIL. ringio's rings are single-issuer, one per loop per thread, and
/// that has not been tested without the GIL yet (docs/versions.md).
#[pymodule(gil_used = true)]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    sys::install_fork_handler();
    op::register(m)?;
    op::fs::register(m)?;
    lines::register(m)?;
    ready::register(m)?;
    ready_future::register(m)?;
    inline_read::register(m)?;
    started::register(m)?;
    add_submodule(m, "uring", fill_uring)?;
    add_submodule(m, "aio", fill_aio)?;
    add_submodule(m, "loop", loopcore::register)?;
    add_submodule(m, "net", net::register)?;
    m.add_class::<buffers::AlignedBuffer>()?;
    m.add_function(wrap_pyfunction!(fastpath::pread_nowait, m)?)?;
    m.add_function(wrap_pyfunction!(fastpath::preadinto_nowait, m)?)?;
    m.add_function(wrap_pyfunction!(buffers::writable_address, m)?)?;
    m.add_function(wrap_pyfunction!(buffers::copy_into, m)?)?;
    m.add_function(wrap_pyfunction!(buffers::copy_whole_into, m)?)?;
    m.add_function(wrap_pyfunction!(fastpath::open_path_cached, m)?)?;
    m.add_function(wrap_pyfunction!(dio_alignment, m)?)?;
    m.add_function(wrap_pyfunction!(fs_type, m)?)?;
    m.add_function(wrap_pyfunction!(fastpath::on_memory_filesystem, m)?)?;
    m.add_function(wrap_pyfunction!(_enter_count, m)?)?;
    m.add_function(wrap_pyfunction!(_aio_spare_count, m)?)?;
    m.add(
        "PartialSubmitError",
        py.get_type::<errors::PartialSubmitError>(),
    )?;
    Ok(())
}
