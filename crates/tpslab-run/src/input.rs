//! Reading the files a user names (records, plans, pool configurations): a regular file
//! (or `-`, standard input, where the command allows it), at most a stated size, UTF-8.
//! tpslab runs as root on production hosts: a device (`/dev/zero`), a FIFO without a
//! writer or a directory is refused at once instead of read forever or waited on.

use anyhow::{anyhow, bail, Result};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The largest record read back (`report`, `compare`, `merge`, `sweep --resume`'s runs),
/// bytes: 512 MiB. The largest records tpslab writes are `tcp --lab` ones kept for an hour
/// at 10 ms (2 flows x 360 000 TCP_INFO samples of some 450 bytes: about 330 MB); an
/// observer keeps at most 20 000 samples (a run's record stays below 30 MB; the fixtures
/// are 16 KB to 280 KB).
pub const RECORD_MAX_BYTES: u64 = 512 << 20;

/// The largest plan or configuration read (`agent`/`fleet --plan`, `sweep --plan`, a
/// sweep's saved plan, `--pool-config`), bytes: 1 MiB, far above any real one (a fleet
/// plan is 10 lines, a pool's configuration a few KB, a sweep's plan of 10 000 cells some
/// 100 KB).
pub const PLAN_MAX_BYTES: u64 = 1 << 20;

/// Reads the file `path` named by `flag` (`""` for a positional argument) as UTF-8 text
/// of at most `cap` bytes: [`read_bytes`], then checked to be UTF-8 (an error names the
/// first byte that is not).
pub fn read_text(flag: &str, path: &Path, cap: u64, stdin: bool) -> Result<String> {
    let bytes = read_bytes(flag, path, cap, stdin)?;
    String::from_utf8(bytes).map_err(|e| {
        anyhow!(
            "{}: not UTF-8 text (at byte {})",
            name(flag, path),
            e.utf8_error().valid_up_to()
        )
    })
}

/// Reads one record file named by `flag` (`""` for a positional argument; `-`: standard
/// input), at most [`RECORD_MAX_BYTES`], and checks it
/// ([`tpslab_record::Record::from_json`]). Errors (one line naming the flag and
/// the file): see [`read_text`], not a record, a record holding what no run writes.
pub fn read_record(flag: &str, path: &Path) -> Result<tpslab_record::Record> {
    let text = read_text(flag, path, RECORD_MAX_BYTES, true)?;
    tpslab_record::Record::from_json(&text).map_err(|e| anyhow!("{}: {e}", name(flag, path)))
}

/// Reads and checks a fleet plan named by `--plan` (`-`: standard input, when `stdin`),
/// at most [`PLAN_MAX_BYTES`]: its text (what a ConfigMap carries) and its settings parsed
/// from that same text. Errors: one line, `--plan PATH: ...` (see [`read_text`]; not a
/// fleet plan).
pub fn read_fleet_plan(
    path: &Path,
    stdin: bool,
) -> Result<(String, tpslab_plan::fleet::FleetPlan)> {
    let text = read_text("--plan", path, PLAN_MAX_BYTES, stdin)?;
    let plan = tpslab_plan::fleet::FleetPlan::parse(&text)
        .map_err(|e| anyhow!("{}: {e}", name("--plan", path)))?;
    Ok((text, plan))
}

/// `--flag PATH`, or the path alone for a positional argument (`flag` empty).
fn name(flag: &str, path: &Path) -> String {
    if flag.is_empty() {
        path.display().to_string()
    } else {
        format!("{flag} {}", path.display())
    }
}

/// Reads the file `path` named by `flag` (`""` for a positional argument): at most `cap`
/// bytes. `-` is standard input when `stdin` is true (also read with the cap). Errors (one
/// line naming the flag, the path and what is allowed): not openable, not a regular file
/// (refused before it is opened; a FIFO swapped in meanwhile never blocks: it is opened
/// with O_NONBLOCK and refused by the descriptor's fstat), over `cap`.
pub fn read_bytes(flag: &str, path: &Path, cap: u64, stdin: bool) -> Result<Vec<u8>> {
    let name = name(flag, path);
    if stdin && path.as_os_str() == "-" {
        return read_capped(&name, std::io::stdin().lock(), cap);
    }
    let regular = |m: &std::fs::Metadata| -> Result<()> {
        if !m.file_type().is_file() {
            bail!(
                "{name}: {}; allowed a regular file{}",
                kind(&m.file_type()),
                if stdin { " or - (standard input)" } else { "" }
            );
        }
        Ok(())
    };
    // Looked at before it is opened: opening a device has effects of its own as root (a
    // watchdog arms, a tape rewinds). The descriptor is checked again below.
    regular(&std::fs::metadata(path).map_err(|e| anyhow!("{name}: {e}"))?)?;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| anyhow!("{name}: {e}"))?;
    let meta = f.metadata().map_err(|e| anyhow!("{name}: {e}"))?;
    regular(&meta)?;
    if meta.len() > cap {
        bail!("{name}: {} bytes; allowed up to {cap} bytes", meta.len());
    }
    read_capped(&name, f, cap)
}

/// Reads up to `cap` bytes; more is an error (the file grew, or standard input is long).
fn read_capped(name: &str, r: impl Read, cap: u64) -> Result<Vec<u8>> {
    let mut buf = Vec::new();
    r.take(cap.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(|e| anyhow!("{name}: {e}"))?;
    if buf.len() as u64 > cap {
        bail!("{name}: more than {cap} bytes; allowed up to {cap} bytes");
    }
    Ok(buf)
}

/// What a file that is not a regular one is, in words.
fn kind(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// `--payload-file`: the datagram or request sent as is, 1..=65507 bytes
/// ([`tpslab_plan::limits::MAX_UDP_PAYLOAD`]). Errors: as [`read_bytes`], or an empty file.
pub fn read_payload_file(p: &Path) -> Result<Vec<u8>> {
    use tpslab_plan::limits::MAX_UDP_PAYLOAD;
    let bytes = read_bytes("--payload-file", p, MAX_UDP_PAYLOAD as u64, false)?;
    if bytes.is_empty() {
        anyhow::bail!(
            "--payload-file {}: 0 bytes; allowed 1..={MAX_UDP_PAYLOAD}",
            p.display()
        );
    }
    Ok(bytes)
}

/// The TLS settings of `--insecure` and `--cacert FILE` (the file read as [`read_bytes`]
/// reads, at most [`tpslab_plan::http::CACERT_BYTES`]). Errors: the file's, one line.
pub fn tls_settings(
    insecure: bool,
    cacert: Option<&Path>,
) -> Result<tpslab_plan::http::TlsSettings> {
    let mut t = tpslab_plan::http::TlsSettings {
        insecure,
        ..Default::default()
    };
    if let Some(p) = cacert {
        t.ca_pem = read_bytes("--cacert", p, tpslab_plan::http::CACERT_BYTES, false)?;
        t.cacert = Some(p.display().to_string());
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("tpslab-input-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_regular_file_within_the_cap_is_read() {
        let d = dir("ok");
        let p = d.join("plan.toml");
        std::fs::write(&p, "target = \"x\"\n").unwrap();
        assert_eq!(
            read_text("--plan", &p, 13, false).unwrap(),
            "target = \"x\"\n"
        );
        let e = read_text("--plan", &p, 12, false).unwrap_err().to_string();
        assert_eq!(
            e,
            format!("--plan {}: 13 bytes; allowed up to 12 bytes", p.display())
        );
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn devices_fifos_and_directories_are_refused_at_once() {
        let e = read_text("", Path::new("/dev/zero"), 100, true)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "/dev/zero: a character device; allowed a regular file or - (standard input)"
        );
        let d = dir("fifo");
        let fifo = d.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.unwrap().success(), "mkfifo");
        let t = std::time::Instant::now();
        let e = read_text("--plan", &fifo, 100, false)
            .unwrap_err()
            .to_string();
        assert!(e.ends_with(": a FIFO; allowed a regular file"), "{e}");
        assert!(t.elapsed() < std::time::Duration::from_secs(1));
        let e = read_text("--plan", &d, 100, false).unwrap_err().to_string();
        assert!(e.ends_with(": a directory; allowed a regular file"), "{e}");
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn a_stream_over_the_cap_and_text_not_utf8_are_refused() {
        let e = read_capped("-", std::io::repeat(0), 1000)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "-: more than 1000 bytes; allowed up to 1000 bytes");
        assert_eq!(read_capped("-", &b"abc"[..], 3).unwrap(), b"abc");
        let d = dir("utf8");
        let p = d.join("r.json");
        std::fs::File::create(&p)
            .unwrap()
            .write_all(b"{\"a\": \"\xff\"}")
            .unwrap();
        let e = read_text("", &p, 100, true).unwrap_err().to_string();
        assert!(e.ends_with(": not UTF-8 text (at byte 7)"), "{e}");
        std::fs::remove_dir_all(d).unwrap();
    }
}
