//! The unit tests of [`super`] (outfile.rs).
use super::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::PathBuf;

fn dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// A folder like /tmp (1777) with a link in it owned by another user (nobody).
fn planted(d: &Path, name: &str, to: &Path) -> PathBuf {
    let shared = d.join("shared");
    let _ = std::fs::create_dir(&shared);
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let link = shared.join(name);
    std::os::unix::fs::symlink(to, &link).unwrap();
    let _ = std::os::unix::fs::lchown(&link, Some(65534), Some(65534));
    link
}

#[test]
fn a_planted_symlink_is_refused_and_its_target_untouched() {
    let d = dir();
    let victim = d.path().join("victim");
    std::fs::write(&victim, "precious").unwrap();
    let link = planted(d.path(), "out.json", &victim);
    let e = write("--json", &link, b"{}").unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("--json {}: a symbolic link", link.display())),
        "{e}"
    );
    assert!(check("--json", &link).is_err());
    assert!(create_stream("--json-stream", &link).is_err());
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    // A dangling link (the target to be created) is refused too.
    let dangling = planted(d.path(), "dangling", &d.path().join("new"));
    assert!(write("--html", &dangling, b"x").is_err());
    assert!(!d.path().join("new").exists());
    // Even one of the user's own, in a folder others can write to.
    let shared = d.path().join("shared");
    let own = shared.join("own");
    std::os::unix::fs::symlink(&victim, &own).unwrap();
    assert!(write("--json", &own, b"{}").is_err());
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
}

#[test]
fn the_users_own_links_are_followed() {
    let d = dir();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let real = d.path().join("run-7.json");
    std::fs::write(&real, "old").unwrap();
    let latest = d.path().join("latest.json");
    std::os::unix::fs::symlink(&real, &latest).unwrap();
    write("--json", &latest, b"new").unwrap();
    assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
    assert!(std::fs::symlink_metadata(&latest).unwrap().is_symlink());
    // /dev/stdout-like: a link to a character device, written in place.
    let null = d.path().join("null");
    std::os::unix::fs::symlink("/dev/null", &null).unwrap();
    write("--json", &null, b"x").unwrap();
}

#[test]
fn a_folder_name_is_refused_before_the_run() {
    let d = dir();
    let p = d.path().join("newdir/");
    let e = check("--json", &p).unwrap_err();
    assert!(e.0.contains("a folder name"), "{e}");
}

#[test]
fn a_hard_link_is_replaced_not_written_through() {
    let d = dir();
    let victim = d.path().join("victim");
    std::fs::write(&victim, "precious").unwrap();
    let out = d.path().join("out.json");
    std::fs::hard_link(&victim, &out).unwrap();
    write("--json", &out, b"record").unwrap();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "record");
    assert_eq!(std::fs::metadata(&out).unwrap().nlink(), 1);
}

#[test]
fn a_new_file_is_0644_and_no_temporary_file_is_left() {
    let d = dir();
    let out = d.path().join("r.json");
    check("--json", &out).unwrap();
    write("--json", &out, b"one").unwrap();
    write("--json", &out, b"two").unwrap();
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "two");
    let mode = std::fs::metadata(&out).unwrap().mode() & 0o7777;
    assert_eq!(mode & !0o644, 0, "mode {mode:o}");
    let names: Vec<_> = std::fs::read_dir(d.path()).unwrap().collect();
    assert_eq!(names.len(), 1, "{names:?}");
}

#[test]
fn a_full_device_fails_with_the_flag_and_path() {
    let e = write("--json", Path::new("/dev/full"), &[b'x'; 10000]).unwrap_err();
    assert!(e.0.starts_with("--json /dev/full: "), "{e}");
    write("--json", Path::new("/dev/null"), b"x").unwrap();
}

#[test]
fn a_fifo_without_a_reader_fails_at_once() {
    let d = dir();
    let fifo = d.path().join("f");
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
    )
    .unwrap();
    let t0 = std::time::Instant::now();
    let e = write("--json", &fifo, b"x").unwrap_err();
    assert!(e.0.ends_with("a FIFO that nobody reads"), "{e}");
    assert!(t0.elapsed() < std::time::Duration::from_secs(1));
    // With a reader it is written in place.
    let reader = std::thread::spawn({
        let fifo = fifo.clone();
        move || std::fs::read(fifo).unwrap()
    });
    let t0 = std::time::Instant::now();
    loop {
        match write("--json", &fifo, b"through the pipe") {
            Ok(()) => break,
            // The reader thread has not opened it yet.
            Err(_) if t0.elapsed() < std::time::Duration::from_secs(5) => {
                std::thread::sleep(std::time::Duration::from_millis(5))
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(reader.join().unwrap(), b"through the pipe");
}

#[test]
fn folders_and_missing_folders_are_refused() {
    let d = dir();
    assert!(write("--json", d.path(), b"x")
        .unwrap_err()
        .0
        .contains("a folder"));
    let missing = d.path().join("no/such/r.json");
    let e = check("--json", &missing).unwrap_err();
    assert!(e.0.contains("does not exist"), "{e}");
}

#[test]
fn a_stream_is_a_new_file_in_place_at_once() {
    let d = dir();
    let out = d.path().join("s.ndjson");
    std::fs::write(&out, "old run's lines\n").unwrap();
    let mut f = create_stream("--json-stream", &out).unwrap();
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "");
    f.write_all(b"{}\n").unwrap();
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "{}\n");
}

/// A folder like /tmp (1777) holding `link -> to`, the link another user's (nobody).
fn planted_folder(d: &Path, to: &Path) -> PathBuf {
    let link = planted(d, "dir", to);
    assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
    link
}

#[test]
fn a_planted_folder_on_the_way_is_refused_and_the_folder_it_names_untouched() {
    let d = dir();
    let victim = d.path().join("victim");
    std::fs::create_dir(&victim).unwrap();
    std::fs::write(victim.join("out.json"), "precious").unwrap();
    let link = planted_folder(d.path(), &victim);
    let out = link.join("out.json");
    let why = format!(
        "--json {}: {} is a symbolic link in a folder others can write to",
        out.display(),
        link.display()
    );
    let e = write("--json", &out, b"{}").unwrap_err().0;
    assert!(e.starts_with(&why), "{e}");
    assert!(check("--json", &out).unwrap_err().0.starts_with(&why));
    assert!(create_stream("--json-stream", &link.join("s.ndjson")).is_err());
    // Deeper in the path, and through `..`, the same.
    assert!(write("--json", &link.join("sub/../out.json"), b"{}").is_err());
    assert!(make_folder("--out", &link.join("sweep/one"), 0o700).is_err());
    assert!(check_folder("--out", &link.join("sweep")).is_err());
    let names: Vec<_> = std::fs::read_dir(&victim).unwrap().collect();
    assert_eq!(names.len(), 1, "{names:?}");
    assert_eq!(
        std::fs::read_to_string(victim.join("out.json")).unwrap(),
        "precious"
    );
    // A link of the user's own to a file, whose target goes through the planted folder.
    let own = d.path().join("own");
    std::fs::create_dir(&own).unwrap();
    std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::symlink(&out, own.join("latest.json")).unwrap();
    let e = write("--json", &own.join("latest.json"), b"{}")
        .unwrap_err()
        .0;
    assert!(
        e.contains(&format!("{} is a symbolic link", link.display())),
        "{e}"
    );
    assert_eq!(
        std::fs::read_to_string(victim.join("out.json")).unwrap(),
        "precious"
    );
}

#[test]
fn the_users_own_folder_links_are_followed() {
    let d = dir();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let data = d.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::os::unix::fs::symlink(&data, d.path().join("out")).unwrap();
    // Relative, as `~/out -> data` often is.
    std::os::unix::fs::symlink("data", d.path().join("rel")).unwrap();
    write("--json", &d.path().join("out/r.json"), b"one").unwrap();
    write("--json", &d.path().join("rel/s.json"), b"two").unwrap();
    assert_eq!(std::fs::read_to_string(data.join("r.json")).unwrap(), "one");
    assert_eq!(std::fs::read_to_string(data.join("s.json")).unwrap(), "two");
    let made = make_folder("--out", &d.path().join("out/sweep/a"), 0o700).unwrap();
    assert!(data.join("sweep/a").is_dir());
    assert_eq!(made.shown, data.join("sweep/a"));
}

#[test]
fn a_descriptor_is_written_through_unless_open_on_a_regular_file() {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    let (mut r, w) = std::io::pipe().unwrap();
    let fd = w.as_raw_fd();
    for p in [format!("/proc/self/fd/{fd}"), format!("/dev/fd/{fd}")] {
        write("--json", Path::new(&p), b"x").unwrap();
    }
    drop(w);
    let mut got = String::new();
    r.read_to_string(&mut got).unwrap();
    assert_eq!(got, "xx");
    let d = dir();
    let f = File::create(d.path().join("f")).unwrap();
    let p = format!("/proc/self/fd/{}", f.as_raw_fd());
    let e = write("--json", Path::new(&p), b"x").unwrap_err().0;
    assert!(
        e.ends_with("a descriptor open on a regular file; give - or the file's own path"),
        "{e}"
    );
}

#[test]
fn a_name_ending_in_dot_is_refused_not_made_a_file() {
    let d = dir();
    for name in ["new/.", "new/..", "new/./"] {
        let p = d.path().join(name);
        let e = write("--json", &p, b"x").unwrap_err().0;
        assert!(e.ends_with("a folder name; give a file name"), "{e}");
        let e = write_new("--json", &p, b"x").unwrap_err().0;
        assert!(e.ends_with("a folder name; give a file name"), "{e}");
        assert!(check("--json", &p).is_err());
    }
    assert!(!d.path().join("new").exists(), "no file made at new");
}

#[test]
fn links_are_counted_across_the_whole_path_not_per_folder_walk() {
    // 25 folder links to walk for each of two links at the file's name: 52 in all.
    let d = dir();
    let real = d.path().join("real");
    std::fs::create_dir(&real).unwrap();
    for i in 0..25 {
        let to = if i == 24 {
            "real".to_string()
        } else {
            format!("L{}", i + 1)
        };
        std::os::unix::fs::symlink(to, d.path().join(format!("L{i}"))).unwrap();
    }
    std::os::unix::fs::symlink("../L0/x1", real.join("x0")).unwrap();
    std::os::unix::fs::symlink("../L0/x2", real.join("x1")).unwrap();
    let e = write("--json", &real.join("x0"), b"x").unwrap_err().0;
    assert!(e.ends_with("more than 40 symbolic links on the way"), "{e}");
    assert!(!real.join("x2").exists());
    // One such link (27 in all) is followed.
    write("--json", &real.join("x1"), b"y").unwrap();
    assert_eq!(std::fs::read_to_string(real.join("x2")).unwrap(), "y");
}

#[test]
fn a_proc_link_to_a_file_is_not_called_a_descriptor() {
    let e = write("--json", Path::new("/proc/self/exe"), b"x")
        .unwrap_err()
        .0;
    assert!(!e.contains("descriptor"), "{e}");
    assert!(e.ends_with("give the file's own path"), "{e}");
}

/// A process in a mount namespace of its own, its working folder a tmpfs mounted there
/// over `mnt` (the host's `mnt` untouched); ended by PID on drop.
struct Unshared(std::process::Child);

impl Drop for Unshared {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_magic_link_is_followed_by_the_kernel_not_by_its_text() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: mounting a tmpfs in a new mount namespace needs root");
        return;
    }
    let d = dir();
    let mnt = d.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let script = format!(
        "mount -t tmpfs none '{}' && cd '{}' && exec sleep 60",
        mnt.display(),
        mnt.display()
    );
    let Ok(child) = std::process::Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &script])
        .spawn()
    else {
        eprintln!("skipped: no unshare");
        return;
    };
    let p = Unshared(child);
    let cwd = PathBuf::from(format!("/proc/{}/cwd", p.0.id()));
    let host = std::fs::metadata(&mnt).unwrap().dev();
    let t0 = std::time::Instant::now();
    while std::fs::metadata(&cwd).map_or(true, |m| m.dev() == host) {
        assert!(t0.elapsed().as_secs() < 5, "the tmpfs was not mounted");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    write("--json", &cwd.join("out.json"), b"ns").unwrap();
    assert_eq!(std::fs::read_to_string(cwd.join("out.json")).unwrap(), "ns");
    assert!(
        !mnt.join("out.json").exists(),
        "written to the host's folder"
    );
}
