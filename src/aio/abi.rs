//! The kernel AIO ABI (linux/aio_abi.h) and its five syscalls.

use std::io;

use crate::sys::cvt;

pub type AioContextId = libc::c_ulong;

pub const IOCB_CMD_PREAD: u16 = 0;
pub const IOCB_CMD_PWRITE: u16 = 1;
pub const IOCB_CMD_FSYNC: u16 = 2;
pub const IOCB_CMD_FDSYNC: u16 = 3;
pub const IOCB_CMD_POLL: u16 = 5;
pub const IOCB_CMD_NOOP: u16 = 6;
pub const IOCB_CMD_PREADV: u16 = 7;
pub const IOCB_CMD_PWRITEV: u16 = 8;

pub const IOCB_FLAG_RESFD: u32 = 1;
pub const IOCB_FLAG_IOPRIO: u32 = 2;

/// struct iocb, little-endian layout (aio_key precedes aio_rw_flags).
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct Iocb {
    pub aio_data: u64,
    pub aio_key: u32,
    pub aio_rw_flags: i32,
    pub aio_lio_opcode: u16,
    pub aio_reqprio: i16,
    pub aio_fildes: u32,
    pub aio_buf: u64,
    pub aio_nbytes: u64,
    pub aio_offset: i64,
    pub aio_reserved2: u64,
    pub aio_flags: u32,
    pub aio_resfd: u32,
}

#[cfg(not(target_endian = "little"))]
compile_error!("ringio's iocb layout is written for little-endian targets");

#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct IoEvent {
    pub data: u64,
    pub obj: u64,
    pub res: i64,
    pub res2: i64,
}

const _: () = assert!(std::mem::size_of::<Iocb>() == 64);
const _: () = assert!(std::mem::size_of::<IoEvent>() == 32);

pub fn io_setup(nr_events: u32) -> io::Result<AioContextId> {
    let mut ctx: AioContextId = 0;
    // SAFETY: `ctx` is a valid, zero-initialised aio_context_t as io_setup requires.
    cvt(unsafe { libc::syscall(libc::SYS_io_setup, nr_events, &mut ctx as *mut AioContextId) })?;
    Ok(ctx)
}

pub fn io_destroy(ctx: AioContextId) -> io::Result<()> {
    // SAFETY: no memory arguments; the kernel validates the context id.
    cvt(unsafe { libc::syscall(libc::SYS_io_destroy, ctx) }).map(drop)
}

/// # Safety
/// Each pointer must point to a valid iocb whose buffers (and iovec arrays) stay
/// valid until the kernel reports its completion.
pub unsafe fn io_submit(ctx: AioContextId, iocbs: &[*mut Iocb]) -> io::Result<usize> {
    // SAFETY: upheld by the caller; the kernel reads `iocbs.len()` pointers.
    cvt(unsafe {
        libc::syscall(
            libc::SYS_io_submit,
            ctx,
            iocbs.len() as libc::c_long,
            iocbs.as_ptr(),
        )
    })
    .map(|n| n as usize)
}

/// # Safety
/// `iocb` must be the address that was submitted (the kernel matches on it).
pub unsafe fn io_cancel(
    ctx: AioContextId,
    iocb: *mut Iocb,
    result: &mut IoEvent,
) -> io::Result<()> {
    // SAFETY: upheld by the caller; `result` is a valid io_event to fill.
    cvt(unsafe { libc::syscall(libc::SYS_io_cancel, ctx, iocb, result as *mut IoEvent) }).map(drop)
}

pub fn io_getevents(
    ctx: AioContextId,
    min_nr: usize,
    events: &mut [IoEvent],
    timeout: Option<&libc::timespec>,
) -> io::Result<usize> {
    let ts = timeout.map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `events` is writable for `events.len()` io_events; `ts` is null or valid.
    cvt(unsafe {
        libc::syscall(
            libc::SYS_io_getevents,
            ctx,
            min_nr as libc::c_long,
            events.len() as libc::c_long,
            events.as_mut_ptr(),
            ts,
        )
    })
    .map(|n| n as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iocb_field_offsets_match_aio_abi_h() {
        let iocb = Iocb::default();
        let base = &iocb as *const Iocb as usize;
        let off = |p: *const u8| p as usize - base;
        assert_eq!(off(&iocb.aio_key as *const u32 as *const u8), 8);
        assert_eq!(off(&iocb.aio_rw_flags as *const i32 as *const u8), 12);
        assert_eq!(off(&iocb.aio_lio_opcode as *const u16 as *const u8), 16);
        assert_eq!(off(&iocb.aio_fildes as *const u32 as *const u8), 20);
        assert_eq!(off(&iocb.aio_buf as *const u64 as *const u8), 24);
        assert_eq!(off(&iocb.aio_offset as *const i64 as *const u8), 40);
        assert_eq!(off(&iocb.aio_flags as *const u32 as *const u8), 56);
        assert_eq!(off(&iocb.aio_resfd as *const u32 as *const u8), 60);
    }

    #[test]
    #[cfg_attr(miri, ignore = "calls the kernel AIO syscalls")]
    fn setup_submit_and_reap_a_write_without_python() {
        use std::io::Read;
        use std::os::fd::AsRawFd;
        let mut file = std::fs::File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(std::env::temp_dir().join(format!("ringio-abi-{}", std::process::id())))
            .unwrap();
        let ctx = io_setup(4).unwrap();
        let data = b"kernel aio";
        let mut iocb = Iocb {
            aio_data: 42,
            aio_lio_opcode: IOCB_CMD_PWRITE,
            aio_fildes: file.as_raw_fd() as u32,
            aio_buf: data.as_ptr() as u64,
            aio_nbytes: data.len() as u64,
            ..Iocb::default()
        };
        // SAFETY: `iocb` and `data` outlive the io_getevents below that reaps it.
        let submitted = unsafe { io_submit(ctx, &[&mut iocb as *mut Iocb]) }.unwrap();
        assert_eq!(submitted, 1);
        let mut events = [IoEvent::default(); 4];
        assert_eq!(io_getevents(ctx, 1, &mut events, None).unwrap(), 1);
        assert_eq!(events[0].data, 42);
        assert_eq!(events[0].res, data.len() as i64);
        io_destroy(ctx).unwrap();
        let mut back = String::new();
        file.read_to_string(&mut back).unwrap();
        assert_eq!(back, "kernel aio");
    }

    #[test]
    #[cfg_attr(miri, ignore = "calls the kernel AIO syscalls")]
    fn io_submit_on_a_bad_fd_is_ebadf() {
        let ctx = io_setup(1).unwrap();
        let mut iocb = Iocb {
            aio_lio_opcode: IOCB_CMD_FSYNC,
            aio_fildes: 999_999,
            ..Iocb::default()
        };
        // SAFETY: FSYNC carries no buffer; the kernel refuses it before reading more.
        let err = unsafe { io_submit(ctx, &[&mut iocb as *mut Iocb]) }.unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EBADF));
        io_destroy(ctx).unwrap();
    }
}
