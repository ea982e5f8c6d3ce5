//! TUN devices and interface setup by ioctl, for the user-space delay line.
//!
//! A TUN device hands every IP packet routed to it to the process holding its file
//! descriptor, and injects every packet written to that descriptor as if it arrived on
//! the device. Two TUN devices in two network namespaces, with tpslab copying packets
//! between their descriptors after a delay, make a link with a chosen RTT, rate and
//! loss: netem in user space, for kernels without it.

use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::NetError;

const TUNSETIFF: libc::c_ulong = 0x4004_54ca; // _IOW('T', 202, int)
const IFF_TUN: libc::c_short = 0x0001;
const IFF_NO_PI: libc::c_short = 0x1000;

/// `struct ifreq`: a 16-byte name and a 24-byte union.
#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    data: [u8; 24],
}

impl IfReq {
    fn new(name: &str) -> Result<IfReq, NetError> {
        let b = name.as_bytes();
        if b.is_empty() || b.len() >= libc::IFNAMSIZ || b.contains(&0) || b.contains(&b'/') {
            return Err(NetError::Invalid(format!(
                "interface name {name:?}: 1 to {} bytes, no '/' or NUL",
                libc::IFNAMSIZ - 1
            )));
        }
        let mut r = IfReq {
            name: [0; libc::IFNAMSIZ],
            data: [0; 24],
        };
        r.name[..b.len()].copy_from_slice(b);
        Ok(r)
    }
    fn set_short(&mut self, v: libc::c_short) {
        self.data[..2].copy_from_slice(&v.to_ne_bytes());
    }
    fn short(&self) -> libc::c_short {
        libc::c_short::from_ne_bytes([self.data[0], self.data[1]])
    }
    fn set_int(&mut self, v: i32) {
        self.data[..4].copy_from_slice(&v.to_ne_bytes());
    }
    fn set_inet(&mut self, a: Ipv4Addr) {
        self.data = [0; 24];
        self.data[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        self.data[4..8].copy_from_slice(&a.octets());
    }
}

fn ioctl(fd: RawFd, req: libc::c_ulong, r: &mut IfReq, what: &str) -> Result<(), NetError> {
    // SAFETY: every request used here reads or writes a `struct ifreq`, which `r` is.
    let rc = unsafe { libc::ioctl(fd, req as _, r as *mut IfReq) };
    if rc != 0 {
        return Err(NetError::last(what.to_string()));
    }
    Ok(())
}

/// A TUN device (IFF_TUN | IFF_NO_PI: raw IP packets, no extra header) created in the
/// calling thread's network namespace. The device exists while this value lives.
pub struct Tun {
    fd: OwnedFd,
    name: String,
}

impl Tun {
    /// Creates TUN device `name` in the calling thread's network namespace, with a
    /// non-blocking descriptor. Errors: no /dev/net/tun, no CAP_NET_ADMIN (EPERM), name
    /// taken (EBUSY) or invalid.
    pub fn create(name: &str) -> Result<Tun, NetError> {
        let mut r = IfReq::new(name)?;
        // SAFETY: open with a NUL-terminated path literal.
        let fd = unsafe {
            libc::open(
                c"/dev/net/tun".as_ptr(),
                libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(NetError::last("open /dev/net/tun"));
        }
        // SAFETY: fd was just opened and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        r.set_short(IFF_TUN | IFF_NO_PI);
        ioctl(
            fd.as_raw_fd(),
            TUNSETIFF,
            &mut r,
            &format!("TUNSETIFF {name}"),
        )?;
        Ok(Tun {
            fd,
            name: name.to_string(),
        })
    }

    /// The device's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The descriptor (for poll).
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Reads one packet into `buf`: its length, bytes; `Err(WouldBlock)` when none waits.
    pub fn read(&self, buf: &mut [u8]) -> std::io::Result<usize> {
        // SAFETY: reads at most buf.len() bytes into buf.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(n as usize)
    }

    /// Injects one packet as if it arrived on the device.
    pub fn write(&self, pkt: &[u8]) -> std::io::Result<usize> {
        // SAFETY: writes pkt.len() bytes from pkt.
        let n = unsafe { libc::write(self.fd.as_raw_fd(), pkt.as_ptr().cast(), pkt.len()) };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(n as usize)
    }
}

const IFF_UP: libc::c_short = libc::IFF_UP as libc::c_short;

fn ctl_sock() -> Result<OwnedFd, NetError> {
    // SAFETY: plain socket(2) call.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(NetError::last("socket AF_INET for ioctl"));
    }
    // SAFETY: fd was just created.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Brings interface `name` up in the calling thread's network namespace (e.g. "lo" in a
/// new namespace). Errors: no such device (ENODEV), no CAP_NET_ADMIN.
pub fn set_up(name: &str) -> Result<(), NetError> {
    let s = ctl_sock()?;
    let mut r = IfReq::new(name)?;
    ioctl(
        s.as_raw_fd(),
        libc::SIOCGIFFLAGS,
        &mut r,
        &format!("SIOCGIFFLAGS {name}"),
    )?;
    let f = r.short() | IFF_UP;
    r.set_short(f);
    ioctl(
        s.as_raw_fd(),
        libc::SIOCSIFFLAGS,
        &mut r,
        &format!("SIOCSIFFLAGS {name} up"),
    )
}

/// Gives point-to-point interface `name` the address `local` with `peer` at the other
/// end (the kernel adds the host route to `peer`), sets its MTU (bytes) and transmit
/// queue length (packets), and brings it up, in the calling thread's namespace.
pub fn config_p2p(
    name: &str,
    local: Ipv4Addr,
    peer: Ipv4Addr,
    mtu: u32,
    txqueuelen: u32,
) -> Result<(), NetError> {
    let s = ctl_sock()?;
    let fd = s.as_raw_fd();
    let mut r = IfReq::new(name)?;
    r.set_inet(local);
    ioctl(
        fd,
        libc::SIOCSIFADDR,
        &mut r,
        &format!("SIOCSIFADDR {name} {local}"),
    )?;
    r.set_inet(peer);
    ioctl(
        fd,
        libc::SIOCSIFDSTADDR,
        &mut r,
        &format!("SIOCSIFDSTADDR {name} {peer}"),
    )?;
    r.set_inet(Ipv4Addr::BROADCAST);
    ioctl(
        fd,
        libc::SIOCSIFNETMASK,
        &mut r,
        &format!("SIOCSIFNETMASK {name}"),
    )?;
    let m = i32::try_from(mtu).map_err(|_| NetError::Invalid(format!("mtu {mtu}")))?;
    r.set_int(m);
    ioctl(
        fd,
        libc::SIOCSIFMTU,
        &mut r,
        &format!("SIOCSIFMTU {name} {mtu}"),
    )?;
    let q = i32::try_from(txqueuelen)
        .map_err(|_| NetError::Invalid(format!("txqueuelen {txqueuelen}")))?;
    r.set_int(q);
    ioctl(
        fd,
        libc::SIOCSIFTXQLEN,
        &mut r,
        &format!("SIOCSIFTXQLEN {name} {txqueuelen}"),
    )?;
    drop(s);
    set_up(name)
}

/// Waits until `fd` is readable or `timeout_ns` passed (ppoll, ns resolution; EINTR
/// counts as a timeout). Returns true when readable.
pub fn wait_readable(fd: RawFd, timeout_ns: u64) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: one valid pollfd, a valid timespec, no signal mask.
    let rc = unsafe { libc::ppoll(&mut p, 1, &ts, std::ptr::null()) };
    rc > 0 && p.revents & libc::POLLIN != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_names_are_refused_before_any_call() {
        for n in ["", "a/b", "0123456789abcdef", "x\0y"] {
            let e = Tun::create(n).err().expect("must fail");
            assert!(e.to_string().contains("interface name"), "{e}");
        }
    }
}
