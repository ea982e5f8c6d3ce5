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

/// The keys in `bytes` read from a terminal in raw mode (every byte pending at one wake-up):
/// a printable ASCII byte is its character, 0x03 Ctrl-C, a lone ESC at the end the Escape
/// key; an escape sequence (`ESC [ ... final`, `ESC O x`: arrows, function keys, a mouse
/// report), Alt with a key (`ESC x`), another control byte or a non-ASCII character is
/// [`Key::Other`], one per sequence. Read by the view itself rather than by crossterm's
/// event reader: crossterm 0.29 reads at most 1 KiB per readiness edge of its epoll, so
/// after a paste of more than that the rest (and a `q` typed after it) waited for the next
/// key to be read at all.
pub fn parse_keys(bytes: &[u8]) -> Vec<Key> {
    let mut keys = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        i += 1;
        keys.push(match b {
            0x1b => match bytes.get(i) {
                None => Key::Esc,
                Some(b'[') => {
                    // CSI: parameters and intermediates, up to a final byte 0x40..=0x7e.
                    i += 1;
                    while i < bytes.len() && !(0x40..=0x7e).contains(&bytes[i]) {
                        i += 1;
                    }
                    i += 1;
                    Key::Other
                }
                Some(_) => {
                    // SS3 (`ESC O x`) or Alt with a key: the key is not a command.
                    i += 1 + usize::from(bytes[i] == b'O');
                    Key::Other
                }
            },
            0x03 => Key::Char('c', true),
            0x20..=0x7e => Key::Char(b as char, false),
            0x80..=0xff => {
                // A character of several bytes: its continuation bytes go with it.
                while i < bytes.len() && bytes[i] & 0xc0 == 0x80 {
                    i += 1;
                }
                Key::Other
            }
            _ => Key::Other,
        });
    }
    keys
}

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

    #[test]
    fn bytes_from_a_raw_terminal_are_keys() {
        use Key::*;
        let k = parse_keys(b"q\x03 \x1b");
        assert_eq!(
            k,
            [Char('q', false), Char('c', true), Char(' ', false), Esc]
        );
        // Arrows (CSI and SS3), a mouse report, Alt-q, a UTF-8 character: none is a `q`.
        let k = parse_keys("\x1b[A\x1bOB\x1b[<0;12;5M\x1bqü\x1b[1;5Cp".as_bytes());
        assert_eq!(
            k,
            [Other, Other, Other, Other, Other, Other, Char('p', false)]
        );
        assert_eq!(commands(&k), [Command::Pause]);
        // A paste of 3000 keys and then q: the q is the last key, not lost.
        let mut paste = vec![b'x'; 3000];
        paste.push(b'q');
        let k = parse_keys(&paste);
        assert_eq!((k.len(), k[3000]), (3001, Char('q', false)));
        assert_eq!(commands(&k), [Command::Stop]);
        // A sequence cut at the end of the bytes ends there.
        assert_eq!(parse_keys(b"\x1b[1;"), [Other]);
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
