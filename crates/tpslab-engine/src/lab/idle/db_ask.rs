//! The server's own idle-timeout settings, asked on a logged-in connection
//! ([`DbConn::ask_settings`]): Redis `CONFIG GET timeout`, MySQL/MariaDB
//! `SELECT @@wait_timeout, @@interactive_timeout`, PostgreSQL `SHOW idle_session_timeout`
//! and `SHOW idle_in_transaction_session_timeout`. A refusal (no permission, a setting the
//! server does not have) is kept as the setting's words, without a value.

use super::wire::{
    my_column_count, my_error, my_is_eof, my_next, my_packet, my_row, pg_duration_ms, pg_error,
    pg_next, redis_command, resp_next, seconds_ms, Resp,
};
use super::{DbConn, LoginError, LOGIN_TIMEOUT};
use fallible_iterator::FallibleIterator;
use postgres_protocol::message::{backend, frontend};
use std::io::Write;
use std::time::Instant;
use tpslab_plan::login::DbProtocol;
use tpslab_record::idle::StatedSetting;

/// What PostgreSQL is asked.
const PG_SETTINGS: [&str; 2] = [
    "idle_session_timeout",
    "idle_in_transaction_session_timeout",
];

/// What MySQL/MariaDB is asked, in one query.
const MY_QUERY: &str = "SELECT @@wait_timeout, @@interactive_timeout";

impl DbConn {
    /// Asks the server for its own idle-timeout settings, each within [`LOGIN_TIMEOUT`]
    /// (blocking meanwhile, non-blocking again after): one [`StatedSetting`] per setting,
    /// its value in ms or the server's refusal. A connection that fails while asking
    /// leaves the settings not yet asked out and the one being asked with the failure.
    pub fn ask_settings(&mut self) -> Vec<StatedSetting> {
        let mut out = vec![];
        if self.s.set_nonblocking(false).is_err() {
            return out;
        }
        self.deadline = Some(Instant::now() + LOGIN_TIMEOUT);
        let failed = match self.proto {
            DbProtocol::Postgres => self.pg_ask(&mut out),
            DbProtocol::Mysql => self.my_ask(&mut out),
            DbProtocol::Redis => self.redis_ask_timeout(&mut out),
        };
        if let Err((name, asked, e)) = failed {
            out.push(StatedSetting::new(
                name,
                &asked,
                None,
                &format!("no answer: {e}"),
            ));
        }
        self.deadline = None;
        let _ = self.s.set_nonblocking(true);
        out
    }

    /// `SHOW` each of [`PG_SETTINGS`], one simple query each (an error ends only its own).
    fn pg_ask(
        &mut self,
        out: &mut Vec<StatedSetting>,
    ) -> Result<(), (&'static str, String, LoginError)> {
        for name in PG_SETTINGS {
            let asked = format!("SHOW {name}");
            let fail = |e: LoginError| (name, asked.clone(), e);
            let mut b = bytes::BytesMut::new();
            frontend::query(&asked, &mut b).map_err(|e| fail(e.into()))?;
            self.s.write_all(&b).map_err(|e| fail(e.into()))?;
            let mut got: Option<(Option<u64>, String)> = None;
            loop {
                let m = match pg_next(&mut self.buf).map_err(|e| fail(e.into()))? {
                    Some(m) => m,
                    None => {
                        self.fill().map_err(|e| fail(e.into()))?;
                        continue;
                    }
                };
                match m {
                    backend::Message::DataRow(row) if got.is_none() => {
                        let buf = row.buffer();
                        let text = row
                            .ranges()
                            .next()
                            .ok()
                            .flatten()
                            .flatten()
                            .and_then(|r| buf.get(r))
                            .map(|v| String::from_utf8_lossy(v).into_owned())
                            .unwrap_or_default();
                        got = Some((pg_duration_ms(&text), text));
                    }
                    backend::Message::ErrorResponse(e) => {
                        let g = pg_error(&e);
                        got = Some((None, format!("{} ({})", g.message, g.code)));
                    }
                    backend::Message::ReadyForQuery(_) => break,
                    _ => {}
                }
            }
            let (value, said) = got.unwrap_or((None, "no row".into()));
            out.push(StatedSetting::new(name, &asked, value, &said));
        }
        Ok(())
    }

    /// [`MY_QUERY`]: a text result set of one row (seconds), or an error packet.
    fn my_ask(
        &mut self,
        out: &mut Vec<StatedSetting>,
    ) -> Result<(), (&'static str, String, LoginError)> {
        let names = ["wait_timeout", "interactive_timeout"];
        let fail = |e: LoginError| (names[0], MY_QUERY.to_string(), e);
        let mut q = vec![0x03];
        q.extend_from_slice(MY_QUERY.as_bytes());
        self.s
            .write_all(&my_packet(0, &q))
            .map_err(|e| fail(e.into()))?;
        let next = |c: &mut DbConn| loop {
            match my_next(&mut c.buf) {
                Ok(Some((_, p))) => return Ok(p),
                Ok(None) => c.fill()?,
                Err(e) => return Err(e),
            }
        };
        let first = next(self).map_err(|e| fail(e.into()))?;
        let row = if first.first() == Some(&0xff) {
            let g = my_error(&first);
            Err(format!("{} (error {})", g.message, g.code))
        } else {
            // Column definitions, their EOF, the rows, their EOF (no DEPRECATE_EOF asked).
            let n = my_column_count(&first).unwrap_or(0);
            for _ in 0..=n {
                next(self).map_err(|e| fail(e.into()))?;
            }
            let mut row = None;
            loop {
                let p = next(self).map_err(|e| fail(e.into()))?;
                if my_is_eof(&p) || p.first() == Some(&0xff) {
                    break;
                }
                row = row.or_else(|| my_row(&p));
            }
            row.ok_or_else(|| "no row".to_string())
        };
        for (i, name) in names.into_iter().enumerate() {
            let asked = format!("SELECT @@{name}");
            out.push(match &row {
                Ok(cols) => {
                    let text = cols.get(i).cloned().flatten().unwrap_or_default();
                    let value = seconds_ms(&text);
                    StatedSetting::new(name, &asked, value, &text)
                }
                Err(e) => StatedSetting::new(name, &asked, None, e),
            });
        }
        Ok(())
    }

    /// `CONFIG GET timeout`: `[timeout, seconds]` (a map in RESP3), or an error (NOPERM
    /// for a user without it, an unknown command where CONFIG is renamed away).
    fn redis_ask_timeout(
        &mut self,
        out: &mut Vec<StatedSetting>,
    ) -> Result<(), (&'static str, String, LoginError)> {
        let asked = "CONFIG GET timeout";
        let fail = |e: LoginError| ("timeout", asked.to_string(), e);
        self.s
            .write_all(&redis_command(&[b"CONFIG", b"GET", b"timeout"]))
            .map_err(|e| fail(e.into()))?;
        let v = loop {
            match resp_next(&mut self.buf, &mut self.scan).map_err(|e| fail(e.into()))? {
                Some(Resp::Push(_)) => {}
                Some(v) => break v,
                None => self.fill().map_err(|e| fail(e.into()))?,
            }
        };
        out.push(match v {
            Resp::Error(e) => StatedSetting::new("timeout", asked, None, &e),
            Resp::Array(Some(items)) if items.len() >= 2 => {
                let text = items[1].text().unwrap_or_default();
                let value = seconds_ms(&text);
                StatedSetting::new("timeout", asked, value, &text)
            }
            _ => StatedSetting::new("timeout", asked, None, "no such setting in its answer"),
        });
        Ok(())
    }
}
