//! The unit tests of [`super`] (walk.rs).
use super::*;
use std::os::unix::fs::PermissionsExt;

#[test]
fn a_link_is_trusted_only_when_nobody_else_could_have_made_it() {
    // root's own, in root's 0755 folder; the system's (/dev/stdout) for a user.
    assert!(trusted(0, 0, 0, 0o40755));
    assert!(trusted(1000, 0, 0, 0o40755));
    // A user's own in their own 0700 folder.
    assert!(trusted(1000, 1000, 1000, 0o40700));
    // Anyone's in a sticky shared folder (/tmp), root's own included.
    assert!(!trusted(0, 0, 0, 0o41777));
    assert!(!trusted(0, 1000, 0, 0o41777));
    // Group-writable; another user's link in root's folder; root in a user's folder.
    assert!(!trusted(0, 0, 0, 0o40775));
    assert!(!trusted(0, 1000, 0, 0o40755));
    assert!(!trusted(0, 1000, 1000, 0o40755));
    assert!(!trusted(1000, 2000, 2000, 0o40755));
}

#[test]
fn a_folder_on_the_way_is_held_to_openssh_strict_modes() {
    assert!(chain_ok(0, 0, 0o40755).is_ok());
    assert!(chain_ok(1000, 1000, 0o40700).is_ok());
    assert!(chain_ok(1000, 0, 0o41777).is_ok());
    assert_eq!(
        chain_ok(0, 1000, 0o40700).unwrap_err(),
        "owned by uid 1000, neither this user nor root"
    );
    assert_eq!(
        chain_ok(0, 0, 0o40777).unwrap_err(),
        "mode 777: group or others can write it"
    );
    assert!(chain_ok(1000, 1000, 0o40770).is_err());
}

#[test]
fn steps_keep_the_root_and_dot_dot_and_drop_dots() {
    let n = |s: &str| Step::Name(s.into());
    assert_eq!(
        steps(Path::new("/a/./b//../c/")),
        vec![Step::Root, n("a"), n("b"), Step::Up, n("c")]
    );
    assert_eq!(steps(Path::new("x")), vec![n("x")]);
    assert!(steps(Path::new(".")).is_empty());
}

#[test]
fn the_same_path_spelled_two_ways_is_the_same() {
    assert!(same_path(Path::new("/a//b/"), Path::new("/a/b")));
    assert!(same_path(Path::new("/a/./b/."), Path::new("/a/b")));
    assert!(same_path(Path::new("./x"), Path::new("x")));
    assert!(!same_path(Path::new("/a/b"), Path::new("/a/c")));
    assert!(!same_path(Path::new("/a/b/.."), Path::new("/a")));
}

/// A 0700 folder of this user's, and a 1777 one inside holding `name -> to` made by nobody.
fn setup() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let shared = d.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    (d, shared)
}

#[test]
fn a_walk_refuses_a_planted_link_and_names_it() {
    let (d, shared) = setup();
    let target = d.path().join("target");
    std::fs::create_dir_all(target.join("sub")).unwrap();
    let link = shared.join("link");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    // Another user's when the test can make it so; this user's own in a 1777 folder is
    // refused as well.
    let _ = std::os::unix::fs::lchown(&link, Some(65534), Some(65534));
    match folder(None, &link.join("sub"), How::default()) {
        Err(Refused::Planted(p)) => assert_eq!(p, link),
        r => panic!("{r:?}"),
    }
    // root's own link in the same 1777 folder: refused as well (anyone could rename it
    // away and put theirs).
    let own = shared.join("own");
    std::os::unix::fs::symlink(&target, &own).unwrap();
    assert!(matches!(
        folder(None, &own, How::default()),
        Err(Refused::Planted(_))
    ));
    // The real folder is reached, and its descriptor is that folder.
    let f = folder(None, &target.join("sub"), How::default()).unwrap();
    assert_eq!(f.shown, target.join("sub"));
    let st = rustix::fs::fstat(&f.fd).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        st.st_ino,
        std::fs::metadata(target.join("sub")).unwrap().ino()
    );
}

#[test]
fn a_walk_makes_missing_folders_and_says_which_is_missing() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("a/b/c");
    match folder(None, &p, How::default()) {
        Err(Refused::Missing(m)) => assert_eq!(m, d.path().join("a")),
        r => panic!("{r:?}"),
    }
    let how = How {
        create: Some(0o700),
        chain: false,
    };
    folder(None, &p, how).unwrap();
    let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
    std::fs::write(d.path().join("file"), "").unwrap();
    assert!(matches!(
        folder(None, &d.path().join("file/x"), how),
        Err(Refused::NotFolder(_))
    ));
}

#[test]
fn a_walk_ends_a_loop_of_links() {
    let d = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("b", d.path().join("a")).unwrap();
    std::os::unix::fs::symlink("a", d.path().join("b")).unwrap();
    assert!(matches!(
        folder(None, &d.path().join("a"), How::default()),
        Err(Refused::Loop(_))
    ));
}

#[test]
fn a_chain_walk_refuses_a_folder_others_can_change() {
    let (d, shared) = setup();
    let chain = How {
        create: None,
        chain: true,
    };
    // The sticky shared folder itself passes (others cannot rename what is not theirs),
    // a folder in it of another user's does not, nor one group-writable.
    folder(None, &shared, chain).unwrap();
    let theirs = shared.join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    if std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).is_ok() {
        match folder(None, &theirs, chain) {
            Err(Refused::Chain(p, why)) => {
                assert_eq!(p, theirs);
                assert_eq!(why, "owned by uid 65534, neither this user nor root");
            }
            r => panic!("{r:?}"),
        }
    }
    let open = d.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    assert!(matches!(
        folder(None, &open.join("."), chain),
        Err(Refused::Chain(..))
    ));
    // Without `chain` both are walked (an output is created by descriptor).
    folder(None, &theirs, How::default()).unwrap();
}
