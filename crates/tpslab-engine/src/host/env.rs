//! Facts about the host for the run record.

use std::collections::BTreeMap;
use tpslab_record::Environment;

use tpslab_plan::sysctl::SYSCTLS;

fn sysctl_path(name: &str) -> String {
    format!("/proc/sys/{}", name.replace('.', "/"))
}

/// Processes whose network namespace may show host-wide sysctls: PID 1, then this
/// process's ancestors (e.g. the shell that ran `ip netns exec`).
fn outer_pids() -> Vec<u32> {
    let mut pids = vec![1];
    let mut pid = std::process::id();
    for _ in 0..64 {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            break;
        };
        let Some(ppid) = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
        else {
            break;
        };
        if ppid <= 1 {
            break;
        }
        pids.push(ppid);
        pid = ppid;
    }
    pids
}

/// The first process of [`outer_pids`] whose namespace shows `path` (and can be joined).
fn outer_pid_showing(path: &str) -> Option<u32> {
    outer_pids().into_iter().find(|&pid| {
        tpslab_net::ns::in_netns_of(pid, || std::path::Path::new(path).exists()).unwrap_or(false)
    })
}

/// Whether `path` exists and is writable by its owner: host-wide sysctls appear read-only
/// (0444) in a network namespace other than the initial one (net.core.rmem_default on 6.x).
fn writable(path: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o200 != 0)
}

/// Reads a sysctl by its dotted name from /proc/sys; None when absent. Host-wide sysctls
/// that a network namespace does not show (net.core.netdev_max_backlog) are read in the
/// namespace of PID 1 or of the nearest ancestor that shows them.
pub fn read_sysctl(name: &str) -> Option<String> {
    read_proc_sys(&sysctl_path(name))
}

/// Reads a file under /proc/sys by its path (`/proc/sys/net/core/rmem_max`), blanks
/// collapsed; None when absent here and in every outer network namespace this process can
/// join (see [`read_sysctl`]).
pub fn read_proc_sys(path: &str) -> Option<String> {
    let read = || std::fs::read_to_string(path).ok();
    let text = match read() {
        Some(t) => t,
        None => tpslab_net::ns::in_netns_of(outer_pid_showing(path)?, read)
            .ok()
            .flatten()?,
    };
    Some(text.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// Writes a sysctl (like `sysctl -w name=value`), in an outer network namespace when this
/// one does not show it (see [`read_sysctl`]).
pub fn write_sysctl(name: &str, value: &str) -> std::io::Result<()> {
    let path = sysctl_path(name);
    if writable(&path) {
        return std::fs::write(&path, value);
    }
    let pid = outer_pids()
        .into_iter()
        .find(|&pid| tpslab_net::ns::in_netns_of(pid, || writable(&path)).unwrap_or(false))
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!(
                "{path}: not in this network namespace nor in an outer one this process can join"
            ),
            )
        })?;
    tpslab_net::ns::in_netns_of(pid, || std::fs::write(&path, value))?
}

/// The network namespace of a process (`net:[INODE]`), or of this one with `None`.
pub fn netns(pid: Option<u32>) -> String {
    let p = pid.map_or("/proc/self/ns/net".to_string(), |p| {
        format!("/proc/{p}/ns/net")
    });
    std::fs::read_link(p)
        .map(|l| l.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Runs `f` in the network namespace of `pid` (this one when None or the same; what
/// /proc/sys/net and sock_diag show depends on it). None when it cannot be entered.
pub fn in_netns_of<T: Send>(pid: Option<u32>, f: impl FnOnce() -> T + Send) -> Option<T> {
    match pid {
        Some(p) if netns(Some(p)) != netns(None) => tpslab_net::ns::in_netns_of(p, f).ok(),
        _ => Some(f()),
    }
}

/// net.core.somaxconn (the cap on any listen backlog) in the network namespace of `pid`
/// (this one when None).
pub fn somaxconn(pid: Option<u32>) -> Option<u64> {
    in_netns_of(pid, || {
        std::fs::read_to_string("/proc/sys/net/core/somaxconn")
            .ok()
            .and_then(|t| t.trim().parse().ok())
    })
    .flatten()
}

/// Collects the environment of this process.
pub fn environment() -> Environment {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    Environment {
        kernel: read("/proc/sys/kernel/osrelease"),
        hostname: read("/proc/sys/kernel/hostname"),
        cpus: tpslab_net::online_cpus(),
        sysctls: SYSCTLS
            .iter()
            .filter_map(|n| Some((n.to_string(), read_sysctl(n)?)))
            .collect::<BTreeMap<_, _>>(),
        netns: netns(None),
        boot_id: read("/proc/sys/kernel/random/boot_id"),
    }
}

/// Peak resident memory of this process, KiB (VmHWM of /proc/self/status).
pub fn peak_rss_kib() -> Option<u64> {
    std::fs::read_to_string("/proc/self/status")
        .ok()?
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// What kind of process `pid` is: its executable, runtime and thread count. None when its
/// /proc entry cannot be read.
pub fn target_process(pid: u32) -> Option<tpslab_record::TargetProcess> {
    // Another user's process, without root: its exe link and maps cannot be read; it is
    // still the target, named by its comm (the runtime from that name alone).
    let exe = match std::fs::read_link(format!("/proc/{pid}/exe")) {
        Ok(e) => e,
        Err(_) => {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
            std::path::PathBuf::from(format!(
                "{} (executable not readable as this user)",
                comm.trim()
            ))
        }
    };
    let name = exe
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let name = name.split(' ').next().unwrap_or_default().to_string();
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    // Go binaries carry "\xff Go buildinf:" in their .go.buildinfo section; only native
    // executables of reasonable size are searched.
    // An ELF file's section headers answer at once (Go's linker always writes a
    // .go.buildinfo section); the search of the contents is for a file without them.
    let go = || {
        let mut f = std::fs::File::open(format!("/proc/{pid}/exe")).ok()?;
        if let Some(names) = elf_section_names(&mut f) {
            return Some(names.iter().any(|n| n == ".go.buildinfo"));
        }
        std::io::Seek::rewind(&mut f).ok()?;
        has_go_buildinfo(f, 256 << 20).ok()
    };
    let quick = tpslab_analysis::runtime::classify(&name, &maps, false);
    let runtime = if quick == tpslab_record::runtime::Runtime::Native {
        tpslab_analysis::runtime::classify(&name, &maps, go().unwrap_or(false))
    } else {
        quick
    };
    Some(tpslab_record::TargetProcess {
        pid,
        exe: exe.to_string_lossy().to_string(),
        runtime,
        threads: tpslab_proc::live::task_ids(pid).len(),
        exact_counts: false,
        found_by: None,
        others: vec![],
    })
}

/// The section names of a 64-bit little-endian ELF file (its section header table and
/// section name table, a few KiB read whatever the file's size); None for anything else
/// (not ELF, 32-bit or big-endian, no section headers, a table out of bounds).
fn elf_section_names(f: &mut (impl std::io::Read + std::io::Seek)) -> Option<Vec<String>> {
    use std::io::SeekFrom;
    let mut h = [0u8; 64];
    f.read_exact(&mut h).ok()?;
    if &h[..4] != b"\x7fELF" || h[4] != 2 || h[5] != 1 {
        return None;
    }
    let u16_at = |b: &[u8], o: usize| u16::from_le_bytes([b[o], b[o + 1]]) as usize;
    let u32_at = |b: &[u8], o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    let u64_at = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
    let (shoff, shentsize, shnum, shstrndx) = (
        u64_at(&h, 0x28),
        u16_at(&h, 0x3a),
        u16_at(&h, 0x3c),
        u16_at(&h, 0x3e),
    );
    if shoff == 0 || shentsize != 64 || shnum == 0 || shnum > 65_280 || shstrndx >= shnum {
        return None;
    }
    let mut table = vec![0u8; shentsize * shnum];
    f.seek(SeekFrom::Start(shoff)).ok()?;
    f.read_exact(&mut table).ok()?;
    let sec = |i: usize| &table[i * shentsize..(i + 1) * shentsize];
    let (str_off, str_len) = (u64_at(sec(shstrndx), 0x18), u64_at(sec(shstrndx), 0x20));
    if str_len > 1 << 20 {
        return None;
    }
    let mut strtab = vec![0u8; str_len as usize];
    f.seek(SeekFrom::Start(str_off)).ok()?;
    f.read_exact(&mut strtab).ok()?;
    Some(
        (0..shnum)
            .filter_map(|i| {
                let name = strtab.get(u32_at(sec(i), 0) as usize..)?;
                let end = name.iter().position(|&b| b == 0)?;
                Some(String::from_utf8_lossy(&name[..end]).into_owned())
            })
            .collect(),
    )
}

/// Whether `r` holds Go's build-info header within its first `max` bytes: the magic
/// `\xff Go buildinf:` at a 16-byte aligned offset, followed by the pointer size (4 or 8)
/// and a flags byte (bits 0-1 only), as Go's debug/buildinfo reads it. The magic alone
/// is not enough: a program that looks for Go binaries (tpslab) holds it as a constant.
/// Reads 1 MiB at a time (keeping an overlap for a header split between two reads), so
/// memory stays small whatever the executable's size.
fn has_go_buildinfo(mut r: impl std::io::Read, max: usize) -> std::io::Result<bool> {
    const MAGIC: &[u8] = b"\xff Go buildinf:";
    const HEADER: usize = 16;
    let mut buf = vec![0u8; (1 << 20) + HEADER];
    // `base`: the offset in `r` of buf[0].
    let (mut keep, mut total, mut base) = (0usize, 0usize, 0usize);
    while total < max {
        let n = r.read(&mut buf[keep..])?;
        if n == 0 {
            break;
        }
        total += n;
        let end = keep + n;
        let header = |i: usize| {
            (base + i).is_multiple_of(HEADER)
                && i + HEADER <= end
                && matches!(buf[i + 14], 4 | 8)
                && buf[i + 15] & !3 == 0
        };
        if memchr::memmem::find_iter(&buf[..end], MAGIC).any(header) {
            return Ok(true);
        }
        keep = (HEADER - 1).min(end);
        base += end - keep;
        buf.copy_within(end - keep..end, 0);
    }
    Ok(false)
}

/// Refuses more TCP users than this namespace has ephemeral ports for (one connection
/// each to one target: net.ipv4.ip_local_port_range).
pub(crate) fn check_ports(users: usize) -> Result<(), crate::EngineError> {
    let Ok(text) = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range") else {
        return Ok(());
    };
    let v: Vec<u64> = text
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    if let [lo, hi] = v[..] {
        let ports = hi.saturating_sub(lo) + 1;
        if users as u64 > ports {
            return Err(crate::EngineError::Other(format!(
                "{users} users need {users} local ports to one target; net.ipv4.ip_local_port_range ({lo} {hi}) gives {ports}: widen it (sysctl -w net.ipv4.ip_local_port_range=\"1024 65535\") or ramp to fewer users"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF64 little-endian file with the sections `names` (after the null one).
    fn fake_elf(names: &[&str]) -> Vec<u8> {
        let mut strtab = vec![0u8];
        let mut offs = vec![];
        for n in names.iter().chain([&".shstrtab"]) {
            offs.push(strtab.len() as u32);
            strtab.extend_from_slice(n.as_bytes());
            strtab.push(0);
        }
        let shnum = names.len() + 2;
        let shoff = 64 + strtab.len() as u64;
        let mut f = vec![0u8; 64];
        f[..6].copy_from_slice(b"\x7fELF\x02\x01");
        f[0x28..0x30].copy_from_slice(&shoff.to_le_bytes());
        f[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        f[0x3c..0x3e].copy_from_slice(&(shnum as u16).to_le_bytes());
        f[0x3e..0x40].copy_from_slice(&((shnum - 1) as u16).to_le_bytes());
        f.extend_from_slice(&strtab);
        f.extend_from_slice(&[0u8; 64]);
        for (i, off) in offs.iter().enumerate() {
            let mut sh = [0u8; 64];
            sh[..4].copy_from_slice(&off.to_le_bytes());
            if i == names.len() {
                sh[0x18..0x20].copy_from_slice(&64u64.to_le_bytes());
                sh[0x20..0x28].copy_from_slice(&(strtab.len() as u64).to_le_bytes());
            }
            f.extend_from_slice(&sh);
        }
        f
    }

    #[test]
    fn elf_section_headers_tell_go_without_reading_the_file() {
        let go = fake_elf(&[".text", ".go.buildinfo"]);
        let names = elf_section_names(&mut std::io::Cursor::new(&go)).unwrap();
        assert_eq!(names, ["", ".text", ".go.buildinfo", ".shstrtab"]);
        let c = fake_elf(&[".text", ".data"]);
        let names = elf_section_names(&mut std::io::Cursor::new(&c)).unwrap();
        assert!(!names.iter().any(|n| n == ".go.buildinfo"), "{names:?}");
        // Not ELF, or without section headers: None (the contents are searched).
        let text = b"#!/bin/sh\n".repeat(10);
        assert_eq!(elf_section_names(&mut std::io::Cursor::new(&text)), None);
        let mut none = c.clone();
        none[0x3c..0x3e].copy_from_slice(&0u16.to_le_bytes());
        assert_eq!(elf_section_names(&mut std::io::Cursor::new(&none)), None);
        // This test's own executable: ELF with a .text section, no .go.buildinfo.
        let mut me = std::fs::File::open("/proc/self/exe").unwrap();
        let names = elf_section_names(&mut me).expect("an ELF file");
        assert!(names.iter().any(|n| n == ".text"), "{names:?}");
        assert!(!names.iter().any(|n| n == ".go.buildinfo"), "{names:?}");
    }

    #[test]
    fn go_header_is_found_across_a_read_boundary() {
        let magic = b"\xff Go buildinf:";
        let put = |data: &mut Vec<u8>, at: usize, ptr: u8, flags: u8| {
            data[at..at + magic.len()].copy_from_slice(magic);
            data[at + 14] = ptr;
            data[at + 15] = flags;
        };
        // Reads end at 1 MiB + 16 bytes, then every 1 MiB + 1 byte later (15 kept): the
        // headers near those ends straddle some of them.
        let ends: Vec<usize> = (0..4)
            .map(|k| (1 << 20) + 16 + k * ((1 << 20) + 1))
            .collect();
        let mut ats = vec![0usize, (1 << 20) - 16];
        ats.extend(ends.iter().map(|e| (e - 1) & !15));
        for at in ats {
            let mut data = vec![0u8; 5 << 20];
            put(&mut data, at, 8, 2);
            assert!(
                has_go_buildinfo(std::io::Cursor::new(&data), 256 << 20).unwrap(),
                "{at}"
            );
        }
        let data = vec![0u8; 3 << 20];
        assert!(!has_go_buildinfo(std::io::Cursor::new(&data), 256 << 20).unwrap());
        // Beyond the cap: not searched.
        let mut data = vec![0u8; 3 << 20];
        put(&mut data, 2 << 20, 8, 0);
        assert!(!has_go_buildinfo(std::io::Cursor::new(&data), 1 << 20).unwrap());
    }

    #[test]
    fn the_magic_alone_is_not_a_go_binary() {
        let magic = b"\xff Go buildinf:";
        // Unaligned, or not followed by a pointer size and flags: a constant in a
        // program's data, not Go's header.
        for (at, ptr, flags) in [(7usize, 8u8, 0u8), (32, b'x', 0), (48, 8, 0x41)] {
            let mut data = vec![0u8; 4096];
            data[at..at + magic.len()].copy_from_slice(magic);
            data[at + 14] = ptr;
            data[at + 15] = flags;
            assert!(
                !has_go_buildinfo(std::io::Cursor::new(&data), 1 << 20).unwrap(),
                "{at} {ptr} {flags}"
            );
        }
        // This test's own executable holds the magic as a constant: not Go.
        let me = target_process(std::process::id()).expect("this process");
        assert_ne!(me.runtime, tpslab_record::runtime::Runtime::Go, "{me:?}");
    }
}
