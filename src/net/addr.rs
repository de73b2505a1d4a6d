//! Socket addresses between Python's tuples and `sockaddr_storage`.

use std::net::{Ipv4Addr, Ipv6Addr};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString, PyTuple};

pub struct SockAddr {
    pub storage: libc::sockaddr_storage,
    pub len: libc::socklen_t,
}

impl SockAddr {
    pub fn empty() -> Self {
        // SAFETY: sockaddr_storage is plain old data; all-zero is a valid value.
        Self {
            storage: unsafe { std::mem::zeroed() },
            len: std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t,
        }
    }
}

fn host_port<'py>(addr: &Bound<'py, PyAny>) -> PyResult<(String, u16, Bound<'py, PyTuple>)> {
    let t = addr
        .cast::<PyTuple>()
        .map_err(|_| PyTypeError::new_err("address must be a tuple (host, port)"))?;
    if t.len() < 2 {
        return Err(PyTypeError::new_err("address must be a tuple (host, port)"));
    }
    let host: String = t.get_item(0)?.extract()?;
    let port: u16 = t
        .get_item(1)?
        .extract()
        .map_err(|_| PyValueError::new_err("port must be an int in 0..65535"))?;
    Ok((host, port, t.clone()))
}

/// Packs a Python address for a socket of `family` (numeric hosts only: names are
/// resolved by the Python layer).
pub fn to_sockaddr(family: i32, addr: &Bound<'_, PyAny>) -> PyResult<SockAddr> {
    let mut out = SockAddr::empty();
    match family {
        libc::AF_INET => {
            let (host, port, _) = host_port(addr)?;
            let ip: Ipv4Addr = host
                .parse()
                .map_err(|_| PyValueError::new_err(format!("not an IPv4 address: {host:?}")))?;
            // SAFETY: sockaddr_storage is large and aligned enough for sockaddr_in.
            let sin = unsafe { &mut *(&mut out.storage as *mut _ as *mut libc::sockaddr_in) };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = port.to_be();
            sin.sin_addr.s_addr = u32::from(ip).to_be();
            out.len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        }
        libc::AF_INET6 => {
            let (host, port, t) = host_port(addr)?;
            let ip: Ipv6Addr = host
                .parse()
                .map_err(|_| PyValueError::new_err(format!("not an IPv6 address: {host:?}")))?;
            let flow: u32 = if t.len() > 2 {
                t.get_item(2)?.extract()?
            } else {
                0
            };
            let scope: u32 = if t.len() > 3 {
                t.get_item(3)?.extract()?
            } else {
                0
            };
            // SAFETY: sockaddr_storage is large and aligned enough for sockaddr_in6.
            let sin6 = unsafe { &mut *(&mut out.storage as *mut _ as *mut libc::sockaddr_in6) };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = port.to_be();
            sin6.sin6_flowinfo = flow.to_be();
            sin6.sin6_addr.s6_addr = ip.octets();
            sin6.sin6_scope_id = scope;
            out.len = std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t;
        }
        libc::AF_UNIX => {
            let path: Vec<u8> = if let Ok(s) = addr.cast::<PyString>() {
                s.to_str()?.as_bytes().to_vec()
            } else if let Ok(b) = addr.cast::<PyBytes>() {
                b.as_bytes().to_vec()
            } else {
                return Err(PyTypeError::new_err("AF_UNIX address must be str or bytes"));
            };
            // SAFETY: sockaddr_storage is large and aligned enough for sockaddr_un.
            let sun = unsafe { &mut *(&mut out.storage as *mut _ as *mut libc::sockaddr_un) };
            if path.len() >= sun.sun_path.len() {
                return Err(PyValueError::new_err("AF_UNIX path too long"));
            }
            sun.sun_family = libc::AF_UNIX as libc::sa_family_t;
            for (d, s) in sun.sun_path.iter_mut().zip(&path) {
                *d = *s as libc::c_char;
            }
            out.len = (std::mem::size_of::<libc::sa_family_t>() + path.len()) as libc::socklen_t;
            if path.first() != Some(&0) {
                out.len += 1; // the NUL of a filesystem path
            }
        }
        _ => {
            return Err(PyValueError::new_err(format!(
                "address family {family} is not supported (AF_INET, AF_INET6, AF_UNIX)"
            )))
        }
    }
    Ok(out)
}

/// The Python form of a kernel-filled address, as the socket module returns it.
pub fn from_sockaddr(py: Python<'_>, addr: &SockAddr) -> PyResult<Py<PyAny>> {
    let family = i32::from(addr.storage.ss_family);
    Ok(match family {
        libc::AF_INET => {
            // SAFETY: the kernel wrote a sockaddr_in (ss_family says so).
            let sin = unsafe { &*(&addr.storage as *const _ as *const libc::sockaddr_in) };
            let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
            (ip.to_string(), u16::from_be(sin.sin_port))
                .into_pyobject(py)?
                .into_any()
                .unbind()
        }
        libc::AF_INET6 => {
            // SAFETY: the kernel wrote a sockaddr_in6 (ss_family says so).
            let sin6 = unsafe { &*(&addr.storage as *const _ as *const libc::sockaddr_in6) };
            let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            (
                ip.to_string(),
                u16::from_be(sin6.sin6_port),
                u32::from_be(sin6.sin6_flowinfo),
                sin6.sin6_scope_id,
            )
                .into_pyobject(py)?
                .into_any()
                .unbind()
        }
        libc::AF_UNIX => {
            // SAFETY: the kernel wrote a sockaddr_un (ss_family says so).
            let sun = unsafe { &*(&addr.storage as *const _ as *const libc::sockaddr_un) };
            let n = (addr.len as usize)
                .saturating_sub(std::mem::size_of::<libc::sa_family_t>())
                .min(sun.sun_path.len());
            let raw: Vec<u8> = sun.sun_path[..n].iter().map(|c| *c as u8).collect();
            if raw.first() == Some(&0) {
                PyBytes::new(py, &raw).into_any().unbind()
            } else {
                let end = raw.iter().position(|c| *c == 0).unwrap_or(raw.len());
                String::from_utf8_lossy(&raw[..end])
                    .into_pyobject(py)?
                    .into_any()
                    .unbind()
            }
        }
        _ => py.None(),
    })
}
