//! `/proc/locks`: who holds a file lock. One line per lock, e.g.
//! `1: FLOCK  ADVISORY  WRITE 4827 fe:00:5784037 0 EOF` (the kind, its mode, the holder's
//! PID, the file as device major:minor in hex and inode in decimal, the range); a lock
//! another process waits for has `->` after the number.

/// The PIDs holding an `flock` (FLOCK lines, not waiters) on the file of device
/// `major:minor` and inode `ino`. Lines of another shape are passed over.
pub fn flock_holders(text: &str, major: u32, minor: u32, ino: u64) -> Vec<u32> {
    text.lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            f.next()?; // "N:"
            if f.next()? != "FLOCK" {
                return None; // "->" (a waiter), POSIX, OFDLCK
            }
            f.next()?; // ADVISORY / MANDATORY
            f.next()?; // READ / WRITE
            let pid: u32 = f.next()?.parse().ok()?;
            let mut file = f.next()?.split(':');
            let maj = u32::from_str_radix(file.next()?, 16).ok()?;
            let min = u32::from_str_radix(file.next()?, 16).ok()?;
            let i: u64 = file.next()?.parse().ok()?;
            (maj == major && min == minor && i == ino).then_some(pid)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines as this kernel (6.18) writes them, with a waiter and a POSIX lock.
    const LOCKS: &str = "\
1: FLOCK  ADVISORY  WRITE 4827 fe:00:5784037 0 EOF
1: -> FLOCK  ADVISORY  WRITE 4900 fe:00:5784037 0 EOF
2: FLOCK  ADVISORY  READ 4827 fe:00:10051587 0 EOF
3: POSIX  ADVISORY  WRITE 5803 fe:00:5784037 0 EOF
4: FLOCK  ADVISORY  WRITE 31428 103:02:5784037 0 EOF
";

    #[test]
    fn holders_of_one_file_and_not_its_waiters() {
        assert_eq!(flock_holders(LOCKS, 0xfe, 0, 5784037), vec![4827]);
        assert_eq!(flock_holders(LOCKS, 0x103, 2, 5784037), vec![31428]);
        assert_eq!(flock_holders(LOCKS, 0xfe, 0, 1), Vec::<u32>::new());
        assert_eq!(
            flock_holders("garbage\n1: FLOCK", 0xfe, 0, 1),
            Vec::<u32>::new()
        );
    }
}
