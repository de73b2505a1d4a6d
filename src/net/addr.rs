//! Socket addresses between Python's tuples and `sockaddr_storage`.
//!
//! The packing and parsing are plain Rust ([`SockAddr::inet`], [`SockAddr::parse`],
//! ...), so the unsafe casts between `sockaddr_storage` and the family-specific
//! structs run under Miri; the Python glue only converts tuples and strings.

use std::net::{Ipv4Addr, Ipv6Addr};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString, PyTuple};

pub struct SockAddr {
    pub storage: libc::sockaddr_storage,
    pub len: libc::socklen_t,
}

/// A kernel-filled address, decoded.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    Inet(Ipv4Addr, u16),
    Inet6(Ipv6Addr, u16, u32, u32),
    /// The path bytes up to the first NUL, or the whole abstract name (leading NUL).
    Unix(Vec<u8>),
    Other,
}

impl SockAddr {
    pub fn empty() -> Self {
        // SAFETY: sockaddr_storage is plain old data; all-zero is a valid value.
        let storage = unsafe { std::mem::zeroed() };
        Self {
            storage,
            len: std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t,
        }
    }

    pub fn inet(ip: Ipv4Addr, port: u16) -> Self {
        let mut out = Self::empty();
        // SAFETY: sockaddr_storage is large and aligned enough for sockaddr_in, and
        // `out` is exclusively borrowed for the lifetime of `sin`.
        let sin = unsafe { &mut *(&mut out.storage as *mut _ as *mut libc::sockaddr_in) };
        sin.sin_family = libc::AF_INET as libc::sa_family_t;
        sin.sin_port = port.to_be();
        sin.sin_addr.s_addr = u32::from(ip).to_be();
        out.len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        out
    }

    pub fn inet6(ip: Ipv6Addr, port: u16, flowinfo: u32, scope_id: u32) -> Self {
        let mut out = Self::empty();
        // SAFETY: sockaddr_storage is large and aligned enough for sockaddr_in6.
        let sin6 = unsafe { &mut *(&mut out.storage as *mut _ as *mut libc::sockaddr_in6) };
        sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
        sin6.sin6_port = port.to_be();
        sin6.sin6_flowinfo = flowinfo.to_be();
        sin6.sin6_addr.s6_addr = ip.octets();
        sin6.sin6_scope_id = scope_id;
        out.len = std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t;
        out
    }

    /// A filesystem path, or an abstract name when `path` starts with a NUL.
    pub fn unix(path: &[u8]) -> Result<Self, &'static str> {
        let mut out = Self::empty();
        // SAFETY: sockaddr_storage is large and aligned enough for sockaddr_un.
        let sun = unsafe { &mut *(&mut out.storage as *mut _ as *mut libc::sockaddr_un) };
        if path.len() >= sun.sun_path.len() {
            return Err("AF_UNIX path too long");
        }
        sun.sun_family = libc::AF_UNIX as libc::sa_family_t;
        for (d, s) in sun.sun_path.iter_mut().zip(path) {
            *d = *s as libc::c_char;
        }
        out.len = (std::mem::size_of::<libc::sa_family_t>() + path.len()) as libc::socklen_t;
        if path.first() != Some(&0) {
            out.len += 1; // the NUL of a filesystem path
        }
        Ok(out)
    }

    pub fn parse(&self) -> Parsed {
        match i32::from(self.storage.ss_family) {
            libc::AF_INET => {
                // SAFETY: ss_family says the storage holds a sockaddr_in, which fits
                // in (and is no more aligned than) sockaddr_storage.
                let sin = unsafe { &*(&self.storage as *const _ as *const libc::sockaddr_in) };
                Parsed::Inet(
                    Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
                    u16::from_be(sin.sin_port),
                )
            }
            libc::AF_INET6 => {
                // SAFETY: ss_family says the storage holds a sockaddr_in6.
                let sin6 = unsafe { &*(&self.storage as *const _ as *const libc::sockaddr_in6) };
                Parsed::Inet6(
                    Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                    u16::from_be(sin6.sin6_port),
                    u32::from_be(sin6.sin6_flowinfo),
                    sin6.sin6_scope_id,
                )
            }
            libc::AF_UNIX => {
                // SAFETY: ss_family says the storage holds a sockaddr_un.
                let sun = unsafe { &*(&self.storage as *const _ as *const libc::sockaddr_un) };
                let n = (self.len as usize)
                    .saturating_sub(std::mem::size_of::<libc::sa_family_t>())
                    .min(sun.sun_path.len());
                let raw: Vec<u8> = sun.sun_path[..n].iter().map(|c| *c as u8).collect();
                if raw.first() == Some(&0) {
                    Parsed::Unix(raw)
                } else {
                    let end = raw.iter().position(|c| *c == 0).unwrap_or(raw.len());
                    Parsed::Unix(raw[..end].to_vec())
                }
            }
            _ => Parsed::Other,
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
    match family {
        libc::AF_INET => {
            let (host, port, _) = host_port(addr)?;
            let ip: Ipv4Addr = host
                .parse()
                .map_err(|_| PyValueError::new_err(format!("not an IPv4 address: {host:?}")))?;
            Ok(SockAddr::inet(ip, port))
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
            Ok(SockAddr::inet6(ip, port, flow, scope))
        }
        libc::AF_UNIX => {
            let path: Vec<u8> = if let Ok(s) = addr.cast::<PyString>() {
                s.to_str()?.as_bytes().to_vec()
            } else if let Ok(b) = addr.cast::<PyBytes>() {
                b.as_bytes().to_vec()
            } else {
                return Err(PyTypeError::new_err("AF_UNIX address must be str or bytes"));
            };
            SockAddr::unix(&path).map_err(PyValueError::new_err)
        }
        _ => Err(PyValueError::new_err(format!(
            "address family {family} is not supported (AF_INET, AF_INET6, AF_UNIX)"
        ))),
    }
}

/// The Python form of a kernel-filled address, as the socket module returns it.
pub fn from_sockaddr(py: Python<'_>, addr: &SockAddr) -> PyResult<Py<PyAny>> {
    Ok(match addr.parse() {
        Parsed::Inet(ip, port) => (ip.to_string(), port)
            .into_pyobject(py)?
            .into_any()
            .unbind(),
        Parsed::Inet6(ip, port, flow, scope) => (ip.to_string(), port, flow, scope)
            .into_pyobject(py)?
            .into_any()
            .unbind(),
        Parsed::Unix(raw) if raw.first() == Some(&0) => PyBytes::new(py, &raw).into_any().unbind(),
        Parsed::Unix(raw) => String::from_utf8_lossy(&raw)
            .into_pyobject(py)?
            .into_any()
            .unbind(),
        Parsed::Other => py.None(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_round_trips_in_network_byte_order() {
        let a = SockAddr::inet(Ipv4Addr::new(127, 0, 0, 1), 8080);
        assert_eq!(a.len as usize, std::mem::size_of::<libc::sockaddr_in>());
        // The port is stored big-endian, as the kernel reads it.
        let raw: &[u8] = unsafe_bytes(&a);
        assert_eq!(&raw[2..4], &8080u16.to_be_bytes());
        assert_eq!(&raw[4..8], &[127, 0, 0, 1]);
        assert_eq!(a.parse(), Parsed::Inet(Ipv4Addr::new(127, 0, 0, 1), 8080));
    }

    #[test]
    fn ipv6_keeps_flowinfo_and_scope() {
        let ip: Ipv6Addr = "fe80::1".parse().unwrap();
        let a = SockAddr::inet6(ip, 443, 7, 2);
        assert_eq!(a.len as usize, std::mem::size_of::<libc::sockaddr_in6>());
        assert_eq!(a.parse(), Parsed::Inet6(ip, 443, 7, 2));
    }

    #[test]
    fn unix_paths_and_abstract_names() {
        let a = SockAddr::unix(b"/tmp/s").unwrap();
        // family + path + the terminating NUL of a filesystem path
        assert_eq!(a.len as usize, 2 + 6 + 1);
        assert_eq!(a.parse(), Parsed::Unix(b"/tmp/s".to_vec()));
        let abs = SockAddr::unix(b"\0name").unwrap();
        assert_eq!(abs.len as usize, 2 + 5);
        assert_eq!(abs.parse(), Parsed::Unix(b"\0name".to_vec()));
    }

    #[test]
    fn unix_path_longer_than_sun_path_is_refused() {
        assert!(SockAddr::unix(&[b'a'; 108]).is_err());
        assert!(SockAddr::unix(&[b'a'; 107]).is_ok());
    }

    #[test]
    fn a_kernel_length_past_sun_path_is_clamped() {
        let mut a = SockAddr::unix(b"/x").unwrap();
        a.len = libc::socklen_t::MAX; // a lying length must not read past the struct
        assert_eq!(a.parse(), Parsed::Unix(b"/x".to_vec()));
    }

    #[test]
    fn unknown_family_parses_as_other() {
        assert_eq!(SockAddr::empty().parse(), Parsed::Other);
    }

    fn unsafe_bytes(a: &SockAddr) -> &[u8] {
        // SAFETY: sockaddr_storage is plain old data, fully initialised by empty().
        unsafe {
            std::slice::from_raw_parts(
                &a.storage as *const _ as *const u8,
                std::mem::size_of::<libc::sockaddr_storage>(),
            )
        }
    }
}
