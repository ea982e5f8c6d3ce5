//! `probe idle --protocol`: the database protocol a probe logs in with, and the
//! credentials it logs in as ([`Login`]: never serialized, never printed).

use crate::PlanError;
use serde::{Deserialize, Serialize};

/// The protocol a probe connection speaks: it completes this protocol's start-up and
/// authentication, idles, then proves it is alive with the protocol's no-op.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum DbProtocol {
    /// PostgreSQL's frontend/backend protocol 3.0 (PostgreSQL, pgbouncer): start-up,
    /// trust, cleartext, md5 or SCRAM-SHA-256; the no-op is the empty query `;`.
    Postgres,
    /// MySQL's client/server protocol (MySQL, MariaDB): handshake v10 with
    /// mysql_native_password; the no-op is COM_PING.
    Mysql,
    /// Redis's RESP: `HELLO 3 AUTH user password` when a user is named (AUTH on a
    /// server older than Redis 6), AUTH when only a password is given; the no-op is PING.
    Redis,
}

impl DbProtocol {
    /// Its name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            DbProtocol::Postgres => "postgres",
            DbProtocol::Mysql => "mysql",
            DbProtocol::Redis => "redis",
        }
    }
}

/// The most bytes of a `--password-file` (a password is a line; the file's first line is
/// taken, its line end dropped).
pub const PASSWORD_FILE_MAX_BYTES: u64 = 4096;

/// The longest user name and database name a login takes, bytes.
pub const LOGIN_NAME_MAX_BYTES: usize = 256;

/// Who a probe logs in as. Not serialized (records hold none of it); its `Debug` shows
/// the user and database, never the password.
#[derive(Clone, PartialEq, Eq)]
pub struct Login {
    /// The user (`--user`).
    pub user: String,
    /// The password (`--password-env`, `--password-file`); None: none is sent (trust,
    /// a Redis without `requirepass`).
    pub password: Option<String>,
    /// The database (`--database`; None: the protocol's default, PostgreSQL's the
    /// user's name, MySQL's none).
    pub database: Option<String>,
    /// `--allow-cleartext-password`: the password may be sent in clear when the server
    /// asks for it so (PostgreSQL's AuthenticationCleartextPassword, its `password`
    /// method). False: such a login is refused before the password is sent.
    pub allow_cleartext: bool,
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Login")
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "(given)"))
            .field("database", &self.database)
            .field("allow_cleartext", &self.allow_cleartext)
            .finish()
    }
}

impl Login {
    /// The login from its settings: a user of 1 to [`LOGIN_NAME_MAX_BYTES`] bytes without
    /// NUL, a database likewise, a password of at most [`PASSWORD_FILE_MAX_BYTES`] bytes
    /// without NUL or line ends (it is never shown in an error). Errors: one line naming
    /// the flag.
    pub fn new(
        user: &str,
        password: Option<String>,
        database: Option<&str>,
    ) -> Result<Login, PlanError> {
        let name = |flag: &str, v: &str| {
            if v.is_empty() || v.len() > LOGIN_NAME_MAX_BYTES || v.contains(['\0', '\r', '\n']) {
                return Err(PlanError::value(
                    flag,
                    format!("{v:?}"),
                    "1 to 256 bytes without NUL or line ends",
                ));
            }
            Ok(v.to_string())
        };
        if let Some(p) = &password {
            if p.len() as u64 > PASSWORD_FILE_MAX_BYTES || p.contains(['\0', '\r', '\n']) {
                return Err(PlanError::Conflict(
                    "the password (not shown): allowed up to 4096 bytes without NUL or line ends"
                        .into(),
                ));
            }
        }
        Ok(Login {
            user: name("--user", user)?,
            password,
            database: database.map(|d| name("--database", d)).transpose()?,
            allow_cleartext: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_login_is_checked_and_its_password_never_shown() {
        let l = Login::new("app", Some("s3cret".into()), Some("appdb")).unwrap();
        let d = format!("{l:?}");
        assert!(!d.contains("s3cret") && d.contains("app"), "{d}");
        let e = Login::new("", None, None).unwrap_err().to_string();
        assert!(e.starts_with("--user"), "{e}");
        let e = Login::new("a", Some("x\ny".into()), None)
            .unwrap_err()
            .to_string();
        assert!(!e.contains("x\ny") && e.contains("not shown"), "{e}");
        let e = Login::new("a", None, Some("d\0b")).unwrap_err().to_string();
        assert!(e.starts_with("--database"), "{e}");
    }
}
