//! The live view's keys as pure functions: what each key pressed asks for ([`commands`])
//! and what that does to a screen and its frozen copy ([`Keyed::apply`]). The terminal's
//! side (reading every event pending at a wake-up, raising the stop) is the caller's; it
//! hands over all the keys read together (`qq`, a paste of `p?`), so none waits for the
//! next byte.

/// A key as the view reads it (the terminal's event, without its crate's types).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// A character, and whether Ctrl was held.
    Char(char, bool),
    /// Escape.
    Esc,
    /// Anything else (a key released or repeated, a mouse or resize event).
    Other,
}

/// What a key asks the view for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// `q`, `Q`, Ctrl-C: stop the run as SIGINT does (a second one: quit at once).
    Stop,
    /// `p`, space: freeze the screen, or go on.
    Pause,
    /// `?`, `h`: show the help, or hide it.
    Help,
    /// Escape: hide the help.
    HideHelp,
}

/// The commands of `keys`, in order (keys that ask for nothing left out).
pub fn commands(keys: &[Key]) -> Vec<Command> {
    keys.iter()
        .filter_map(|k| match *k {
            Key::Char('q' | 'Q', _) | Key::Char('c', true) => Some(Command::Stop),
            Key::Char('p' | ' ', _) => Some(Command::Pause),
            Key::Char('?' | 'h', _) => Some(Command::Help),
            Key::Esc => Some(Command::HideHelp),
            _ => None,
        })
        .collect()
}

/// The keys in `bytes` read from a terminal in raw mode, and how many bytes they took: a
/// printable ASCII byte is its character, 0x03 Ctrl-C, ESC alone the Escape key; an escape
/// sequence (`ESC [ ... final`, `ESC O x`: arrows, function keys) or another control byte
/// or a non-ASCII character is [`Key::Other`], one per sequence. ESC before any other byte
/// (Alt with a key, or Escape and a key read together) is Escape and then that key, so
/// `ESC q` still stops the run; a byte that cannot be in a sequence (Ctrl-C inside a CSI)
/// ends it and is a key of its own.
///
/// With `more` (the terminal may still be sending), a sequence cut at the end of `bytes`
/// (a lone ESC, `ESC [ 1 ;`, `ESC O`, part of a UTF-8 character) is left untaken, for
/// the caller to put before the next bytes read: a sequence split across two reads is one
/// key, its tail never read as keys of its own. Without `more` everything is taken (a lone
/// ESC is Escape). A CSI longer than [`CSI_MAX`] bytes is taken as it stands.
///
/// Read by the view itself rather than by crossterm's event reader: crossterm 0.29 reads
/// at most 1 KiB per readiness edge of its epoll, so after a paste of more than that the
/// rest (and a `q` typed after it) waited for the next key to be read at all.
pub fn parse_keys(bytes: &[u8], more: bool) -> (Vec<Key>, usize) {
    let mut keys = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let start = i;
        let b = bytes[i];
        i += 1;
        let key = match b {
            0x1b => match bytes.get(i) {
                None if more => return (keys, start),
                None => Key::Esc,
                Some(b'[') => {
                    // CSI: parameter and intermediate bytes (0x20..=0x3f), then a final
                    // byte (0x40..=0x7e); any other byte ends it and is read as a key.
                    i += 1;
                    while i < bytes.len() && (0x20..=0x3f).contains(&bytes[i]) {
                        i += 1;
                    }
                    match bytes.get(i) {
                        None if more && i - start <= CSI_MAX => return (keys, start),
                        Some(0x40..=0x7e) => i += 1,
                        _ => {}
                    }
                    Key::Other
                }
                Some(b'O') => match bytes.get(i + 1) {
                    None if more => return (keys, start),
                    Some(0x40..=0x7e) => {
                        i += 2;
                        Key::Other
                    }
                    // `ESC O` then a byte no SS3 ends with: Alt-O, the byte its own key.
                    _ => {
                        i += 1;
                        Key::Other
                    }
                },
                // Alt with a key, or Escape and then a key: Escape, the key read next.
                Some(_) => Key::Esc,
            },
            0x03 => Key::Char('c', true),
            0x20..=0x7e => Key::Char(b as char, false),
            0x80..=0xff => {
                // A character of several bytes: its continuation bytes go with it.
                let want = match b {
                    0xc0..=0xdf => 1,
                    0xe0..=0xef => 2,
                    0xf0..=0xf7 => 3,
                    _ => 0,
                };
                let mut got = 0;
                while got < want && i < bytes.len() && bytes[i] & 0xc0 == 0x80 {
                    i += 1;
                    got += 1;
                }
                if got < want && i == bytes.len() && more {
                    return (keys, start);
                }
                Key::Other
            }
            _ => Key::Other,
        };
        keys.push(key);
    }
    (keys, i)
}

/// The longest CSI held back for the next read, bytes (a longer one is taken as it
/// stands: no terminal's key sends one).
pub const CSI_MAX: usize = 32;

/// A screen whose keys' flags the view sets.
pub trait KeyFlags: Clone {
    /// (paused, help, stopping).
    fn key_flags(&mut self) -> (&mut bool, &mut bool, &mut bool);
}

/// A screen with its frozen copy (while paused: what is drawn).
#[derive(Debug, Clone)]
pub struct Keyed<S> {
    /// The screen, fed while paused too.
    pub st: S,
    /// The copy drawn while paused.
    pub frozen: Option<S>,
}

impl<S: KeyFlags> Keyed<S> {
    /// `st`, not paused.
    pub fn new(st: S) -> Keyed<S> {
        Keyed { st, frozen: None }
    }

    /// Applies `cmds` in order; `stop` is called for each [`Command::Stop`].
    pub fn apply(&mut self, cmds: &[Command], stop: &mut dyn FnMut()) {
        for c in cmds {
            match c {
                Command::Stop => stop(),
                Command::Pause => {
                    self.frozen = match self.frozen.take() {
                        Some(_) => None,
                        None => {
                            let mut fz = self.st.clone();
                            *fz.key_flags().0 = true;
                            Some(fz)
                        }
                    };
                }
                Command::Help => {
                    let h = self.st.key_flags().1;
                    *h = !*h;
                }
                Command::HideHelp => *self.st.key_flags().1 = false,
            }
        }
    }

    /// What is drawn now: the frozen copy (with the screen's help and stopping flags) while
    /// paused, else the screen; `stopping` is set on both first.
    pub fn shown(&mut self, stopping: bool) -> &S {
        *self.st.key_flags().2 = stopping;
        let (help, stopping) = {
            let (_, h, s) = self.st.key_flags();
            (*h, *s)
        };
        match &mut self.frozen {
            Some(fz) => {
                let (_, h, s) = fz.key_flags();
                (*h, *s) = (help, stopping);
                &*fz
            }
            None => &self.st,
        }
    }
}

impl KeyFlags for super::LiveState {
    fn key_flags(&mut self) -> (&mut bool, &mut bool, &mut bool) {
        (&mut self.paused, &mut self.help, &mut self.stopping)
    }
}

impl KeyFlags for super::RampLiveState {
    fn key_flags(&mut self) -> (&mut bool, &mut bool, &mut bool) {
        (&mut self.paused, &mut self.help, &mut self.stopping)
    }
}

impl KeyFlags for super::RunsLiveState {
    fn key_flags(&mut self) -> (&mut bool, &mut bool, &mut bool) {
        (
            &mut self.run.paused,
            &mut self.run.help,
            &mut self.run.stopping,
        )
    }
}

impl KeyFlags for super::HttpLiveState {
    fn key_flags(&mut self) -> (&mut bool, &mut bool, &mut bool) {
        (&mut self.paused, &mut self.help, &mut self.stopping)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Default, PartialEq)]
    struct Flags(bool, bool, bool, u32);

    impl KeyFlags for Flags {
        fn key_flags(&mut self) -> (&mut bool, &mut bool, &mut bool) {
            (&mut self.0, &mut self.1, &mut self.2)
        }
    }

    fn typed(s: &str) -> Vec<Key> {
        s.chars().map(|c| Key::Char(c, false)).collect()
    }

    #[test]
    fn keys_read_together_are_all_taken() {
        // `qq` in one read: two stops (the second quits at once).
        assert_eq!(commands(&typed("qq")), vec![Command::Stop, Command::Stop]);
        let mut k = Keyed::new(Flags::default());
        let mut stops = 0;
        k.apply(&commands(&typed("qq")), &mut || stops += 1);
        assert_eq!(stops, 2);
        // A paste of `p?`: paused and the help shown, both at once.
        k.apply(&commands(&typed("p?")), &mut || stops += 1);
        assert!(k.frozen.is_some() && k.st.1);
        let shown = k.shown(false).clone();
        assert!(shown.0 && shown.1, "{shown:?}");
        // Ctrl-C stops, a released or unknown key does nothing, Esc hides the help.
        let keys = [
            Key::Char('c', true),
            Key::Other,
            Key::Char('x', false),
            Key::Esc,
        ];
        assert_eq!(commands(&keys), vec![Command::Stop, Command::HideHelp]);
    }

    /// All of `bytes` as keys (nothing more to come).
    fn all(bytes: &[u8]) -> Vec<Key> {
        let (k, n) = parse_keys(bytes, false);
        assert_eq!(n, bytes.len());
        k
    }

    #[test]
    fn bytes_from_a_raw_terminal_are_keys() {
        use Key::*;
        let k = all(b"q\x03 \x1b");
        assert_eq!(
            k,
            [Char('q', false), Char('c', true), Char(' ', false), Esc]
        );
        // Arrows (CSI and SS3), a mouse report, a modified arrow, a UTF-8 character: none
        // is a command.
        let k = all("\x1b[A\x1bOB\x1b[<0;12;5M\x1b[1;5Cü".as_bytes());
        assert_eq!(k, [Other, Other, Other, Other, Other]);
        assert!(commands(&k).is_empty());
        // A paste of 3000 keys and then q: the q is the last key, not lost.
        let mut paste = vec![b'x'; 3000];
        paste.push(b'q');
        let k = all(&paste);
        assert_eq!((k.len(), k[3000]), (3001, Char('q', false)));
        assert_eq!(commands(&k), [Command::Stop]);
        // A sequence cut at the end with nothing more to come ends there.
        assert_eq!(all(b"\x1b[1;"), [Other]);
    }

    /// ESC and then q or Ctrl-C in one read (Alt-q, or Escape and q typed together) still
    /// stops the run; Ctrl-C inside a CSI ends it and stops the run.
    #[test]
    fn a_stop_after_an_escape_is_not_swallowed() {
        use Key::*;
        assert_eq!(all(b"\x1bq"), [Esc, Char('q', false)]);
        assert_eq!(all(b"\x1b\x03"), [Esc, Char('c', true)]);
        assert_eq!(all(b"\x1b[1;\x03"), [Other, Char('c', true)]);
        assert_eq!(all(b"\x1bO\x03"), [Other, Char('c', true)]);
        for b in [&b"\x1bq"[..], b"\x1b\x03", b"\x1b[1;\x03", b"\x1bO\x03"] {
            assert!(commands(&all(b)).contains(&Command::Stop), "{b:?}");
        }
    }

    /// A sequence split across two reads is one key: its start is left for the next read,
    /// its tail never read as keys (F2 split after `ESC O` is not `Q`, a stop).
    #[test]
    fn a_sequence_split_across_reads_is_one_key() {
        use Key::*;
        for (first, second) in [
            (&b"x\x1bO"[..], &b"Q"[..]),
            (b"x\x1b", b"OQ"),
            (b"x\x1b[1;", b"5Cp"),
            (b"x\xc3", b"\xbc"),
        ] {
            let (k1, n) = parse_keys(first, true);
            assert_eq!((k1, n), (vec![Char('x', false)], 1), "{first:?}");
            let mut rest = first[n..].to_vec();
            rest.extend_from_slice(second);
            let (k2, m) = parse_keys(&rest, true);
            assert_eq!(m, rest.len(), "{rest:?}");
            assert_eq!(k2[0], Other, "{rest:?}");
            assert!(!commands(&k2[..1]).contains(&Command::Stop), "{rest:?}");
        }
        // `ESC [ 1 ; 5 C` then `p`: the arrow, then a pause.
        let (k, _) = parse_keys(b"\x1b[1;5Cp", true);
        assert_eq!(commands(&k), [Command::Pause]);
        // A lone ESC held while more may come, Escape once nothing did.
        assert_eq!(parse_keys(b"\x1b", true), (vec![], 0));
        assert_eq!(parse_keys(b"\x1b", false), (vec![Esc], 1));
        // A CSI that never ends is not held for ever.
        let long = [b"\x1b[".to_vec(), vec![b'1'; CSI_MAX + 8]].concat();
        assert_eq!(parse_keys(&long, true), (vec![Other], long.len()));
    }

    #[test]
    fn the_frozen_copy_is_drawn_while_the_screen_is_fed() {
        let mut k = Keyed::new(Flags::default());
        k.apply(&[Command::Pause], &mut || {});
        k.st.3 = 7;
        assert_eq!(k.shown(true).3, 0, "the frozen copy");
        assert!(k.shown(true).2, "stopping shown on the frozen copy");
        k.apply(&[Command::Pause], &mut || {});
        assert_eq!(k.shown(true).3, 7);
    }
}
