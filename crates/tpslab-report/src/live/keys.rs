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
