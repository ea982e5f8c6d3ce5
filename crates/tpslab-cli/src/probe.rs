//! `tpslab probe idle`: after how long of idleness a path kills a TCP connection (S5),
//! against a server or in tpslab's lab behind a middlebox with a known timeout.

use anyhow::{bail, Result};
use clap::{Args, Subcommand, ValueEnum};
use std::time::Duration;
use tpslab_plan::login::{DbProtocol, Login, PASSWORD_FILE_MAX_BYTES};
use tpslab_plan::probe::{IdlePlan, IdleTarget, IdleTimer, OnIdle, PoolPlan, ResponderPlan};
use tpslab_run::probe::IdleSetup;

#[derive(Subcommand, Debug)]
pub enum ProbeCmd {
    /// The idle timeout of the path to a TCP server: idle connections on a ladder of
    /// intervals, tested with TCP keepalive (no application bytes), narrowed by bisection;
    /// --udp: UDP mappings to `probe idle-responder`.
    Idle(IdleArgs),
    /// The far side of `probe idle --udp` (answers each request after the idle time it
    /// asks for) and `--server-first` (probes each connection first, same port over
    /// TCP), until Ctrl-C or --duration.
    IdleResponder(ResponderArgs),
    /// S5 in miniature: a connection pool through the lab's middlebox, validated and
    /// expired on the intervals given; shows requests failing on connections the path
    /// forgot, or none when the pool's intervals sit below the timeout.
    Pool(PoolArgs),
}

/// The flags of a probe that logs in (`probe idle`, `probe pool`): the protocol and who
/// it logs in as.
#[derive(Args, Debug)]
pub struct LoginFlags {
    /// Log in as a pool's connection would with this database protocol (each probe and
    /// the control; each pooled connection): start-up and authentication, idle, then the
    /// protocol's no-op (postgres `;`, mysql COM_PING, redis PING); the server's own
    /// goodbye names who ended it, and the server is asked for its own idle timeout.
    /// Needs TARGET.
    #[arg(long, value_enum, value_name = "PROTOCOL")]
    pub protocol: Option<ProtocolArg>,
    /// With --protocol: the user to log in as (redis: default `default`; a user named
    /// logs in with HELLO 3 AUTH).
    #[arg(long, value_name = "NAME", requires = "protocol")]
    pub user: Option<String>,
    /// With --protocol: the environment variable holding the password (never echoed,
    /// never in the record).
    #[arg(
        long,
        value_name = "VAR",
        requires = "protocol",
        conflicts_with = "password_file"
    )]
    pub password_env: Option<String>,
    /// With --protocol: a regular file whose first line is the password (at most 4096
    /// bytes; never echoed, never in the record).
    #[arg(long, value_name = "FILE", requires = "protocol")]
    pub password_file: Option<std::path::PathBuf>,
    /// With --protocol: the database to log in to (postgres: default the user's name).
    #[arg(long, value_name = "NAME", requires = "protocol")]
    pub database: Option<String>,
    /// With --protocol postgres: send the password in clear when the server asks for it
    /// so (its `password` method); refused otherwise, before the password is sent.
    #[arg(long, requires = "protocol")]
    pub allow_cleartext_password: bool,
}

impl LoginFlags {
    /// The protocol given, in the plan's terms.
    pub fn protocol(&self) -> Option<DbProtocol> {
        self.protocol.map(|p| match p {
            ProtocolArg::Postgres => DbProtocol::Postgres,
            ProtocolArg::Mysql => DbProtocol::Mysql,
            ProtocolArg::Redis => DbProtocol::Redis,
        })
    }

    /// Who `--protocol` logs in as: `--user` (redis: `default` when not given), the
    /// password from `--password-env` or `--password-file` (a regular file, at most
    /// [`PASSWORD_FILE_MAX_BYTES`], its first line), `--database`,
    /// `--allow-cleartext-password`. Errors: one line naming the flag, never the password.
    pub fn login(&self, p: DbProtocol) -> Result<Login> {
        let user = match (&self.user, p) {
            (Some(u), _) => u.clone(),
            (None, DbProtocol::Redis) => "default".into(),
            (None, _) => bail!(
                "--protocol {} needs --user NAME: the user a pool's connection logs in as",
                p.name()
            ),
        };
        let password = match (&self.password_env, &self.password_file) {
            (Some(var), _) => Some(std::env::var(var).map_err(|_| {
                anyhow::anyhow!("--password-env {var}: no such environment variable (or not UTF-8)")
            })?),
            (None, Some(f)) => {
                let text = tpslab_run::input::read_text(
                    "--password-file",
                    f,
                    PASSWORD_FILE_MAX_BYTES,
                    false,
                )?;
                let first = text.lines().next().unwrap_or("");
                if first.is_empty() {
                    bail!(
                        "--password-file {}: its first line is empty (the password is the file's first line)",
                        f.display()
                    );
                }
                Some(first.to_string())
            }
            (None, None) => None,
        };
        let mut login = Login::new(&user, password, self.database.as_deref())?;
        login.allow_cleartext = self.allow_cleartext_password;
        Ok(login)
    }
}

#[derive(Args, Debug)]
pub struct PoolArgs {
    /// A real path instead of the lab: an echo server, or a proxy in front of one,
    /// HOST:PORT (then --path-idle-timeout states the path's timeout, as `probe idle`
    /// measured it; requests idle past it are marked).
    pub target: Option<String>,
    /// The lab middlebox's idle timeout (it then drops the flow's segments). Not with
    /// HOST:PORT.
    #[arg(long, value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub lab_idle_timeout: Option<Duration>,
    /// With HOST:PORT: the path's idle timeout, as `probe idle` measured it (requests on
    /// connections idle past it are marked).
    #[arg(long, value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub path_idle_timeout: Option<Duration>,
    /// How often the pool tests its idle connections (default: never).
    #[arg(long, value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub validate_every: Option<Duration>,
    /// Close connections idle this long (default: never).
    #[arg(long, value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub max_idle: Option<Duration>,
    /// Connections kept open however idle.
    #[arg(long, default_value_t = 2)]
    pub min_idle: usize,
    /// Requests to send.
    #[arg(long, default_value_t = 6)]
    pub requests: usize,
    /// Time between requests.
    #[arg(long, default_value = "4s", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub request_every: Duration,
    /// A request without its answer in this long fails.
    #[arg(long, default_value = "2s", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub query_timeout: Duration,
    #[command(flatten)]
    pub login: LoginFlags,
    #[command(flatten)]
    pub record: crate::flags::RecordFlag,
}

#[derive(Args, Debug)]
pub struct ResponderArgs {
    /// Address to answer on, ADDR:PORT.
    pub bind: String,
    /// Stop after this long (default: until Ctrl-C).
    #[arg(long, value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub duration: Option<Duration>,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum OnIdleArg {
    /// Drop the forgotten flow's segments silently.
    Drop,
    /// Answer them with a RST to both ends.
    Reset,
    /// Let the near side's segments open the flow again (conntrack's loose pickup, many
    /// NATs); drop the far side's. Only `--server-first` sees such a timeout.
    Reopen,
    /// End the flow itself at its timeout with a FIN to both ends (a proxy's idle
    /// timeout), then drop its segments.
    Fin,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum ProtocolArg {
    /// PostgreSQL's protocol (PostgreSQL, pgbouncer): trust, password, md5, SCRAM-SHA-256.
    Postgres,
    /// MySQL's protocol (MySQL, MariaDB): mysql_native_password.
    Mysql,
    /// Redis's RESP: AUTH when a password is given.
    Redis,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum TimerArg {
    /// Every packet resets the lab middlebox's idle timer, TCP keepalive included.
    Any,
    /// Only packets with payload, either direction (a proxy counting application data).
    Payload,
    /// Only payload from the near side (the client).
    NearPayload,
}

#[derive(Args, Debug)]
pub struct IdleArgs {
    /// The TCP server, HOST:PORT (or, with --udp, tpslab's idle-responder; or
    /// --lab-idle-timeout for the lab).
    pub target: Option<String>,
    /// UDP mappings (NAT, conntrack) instead of TCP connections: the far side must run
    /// `tpslab probe idle-responder` (the lab does).
    #[arg(long, conflicts_with = "protocol")]
    pub udp: bool,
    /// TCP, the far side probing first: `tpslab probe idle-responder` there sets its own
    /// keepalive on each connection and reports the fates (finds middleboxes that let
    /// the near side re-open a forgotten flow).
    #[arg(long, conflicts_with_all = ["udp", "protocol"])]
    pub server_first: bool,
    /// Shortest idle interval tried (whole seconds).
    #[arg(long, default_value = "10s", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub min: Duration,
    /// Longest idle interval tried (whole seconds, at most 2h): the study can last this long.
    #[arg(long, default_value = "1h", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub max: Duration,
    /// Stop when the timeout is known within this (whole seconds). Default: 5s, or half
    /// the range --max - --min when that is less (at least 1s).
    #[arg(long, value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub resolution: Option<Duration>,
    /// Connections open at once, the control connection included.
    #[arg(long, default_value_t = 16)]
    pub connections: usize,
    /// Probe tpslab's lab instead of a server: two throwaway namespaces, a middlebox that
    /// forgets flows idle for longer than this.
    #[arg(long, value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub lab_idle_timeout: Option<Duration>,
    /// What the lab's middlebox does to a forgotten flow's segments.
    #[arg(long, value_enum, default_value = "drop")]
    pub lab_on_idle: OnIdleArg,
    /// What resets the lab middlebox's idle timer.
    #[arg(long, value_enum, default_value = "any")]
    pub lab_timer: TimerArg,
    /// Bytes you allow as a payload probe (1 to 32; escapes \n \r \t \0 \\ \xHH),
    /// e.g. "PING\r\n" for redis: a connection open for the whole study sends them
    /// every second (an echo's answers count as the far side's payload), to tell whether
    /// payload resets the path's timer. With --server-first (tpslab's responder there):
    /// three such connections, payload from the near side only, from the far side only,
    /// and both ways. (A bare ACK without payload is not tried: it needs raw sockets.)
    #[arg(long, value_name = "BYTES", conflicts_with_all = ["udp", "protocol"])]
    pub probe_data: Option<String>,
    #[command(flatten)]
    pub login: LoginFlags,
    /// A connection pool's configuration to judge against the timeout found
    /// (repeatable): hibernate.cfg.xml, c3p0.properties, HikariCP .properties,
    /// pgbouncer.ini.
    #[arg(long, value_name = "FILE")]
    pub pool_config: Vec<std::path::PathBuf>,
    #[command(flatten)]
    pub record: crate::flags::RecordFlag,
}

impl PoolArgs {
    /// The validated plan and who its connections log in as (`--protocol`; never in
    /// the plan), the output files checked after them, as before.
    pub fn plan(&self) -> Result<(PoolPlan, Option<Login>)> {
        let a = self;
        let plan = PoolPlan {
            idle_timeout: PoolPlan::timeout_from_flags(
                a.target.is_some(),
                a.lab_idle_timeout,
                a.path_idle_timeout,
            )?,
            validate_every: a.validate_every,
            max_idle: a.max_idle,
            min_idle: a.min_idle,
            requests: a.requests,
            request_every: a.request_every,
            query_timeout: a.query_timeout,
            target: a
                .target
                .as_deref()
                .map(tpslab_plan::target::resolve)
                .transpose()?,
            protocol: a.login.protocol(),
        };
        plan.validate()?;
        let login = plan.protocol.map(|p| a.login.login(p)).transpose()?;
        a.record.check(false)?;
        Ok((plan, login))
    }
}

impl ResponderArgs {
    /// The validated plan.
    pub fn plan(&self) -> Result<ResponderPlan> {
        Ok(ResponderPlan::new(&self.bind, self.duration)?)
    }
}

impl IdleArgs {
    /// The validated study and its pool files (read and checked), then the output files.
    /// A `--resolution` not given is derived and noted as such for the errors.
    pub fn plan(&self) -> Result<IdleSetup> {
        let a = self;
        let on_idle = match a.lab_on_idle {
            OnIdleArg::Drop => OnIdle::Drop,
            OnIdleArg::Reset => OnIdle::Reset,
            OnIdleArg::Reopen => OnIdle::Reopen,
            OnIdleArg::Fin => OnIdle::Fin,
        };
        let timer = match a.lab_timer {
            TimerArg::Any => IdleTimer::Any,
            TimerArg::Payload => IdleTimer::Payload,
            TimerArg::NearPayload => IdleTimer::NearPayload,
        };
        let target =
            IdleTarget::from_flags(a.target.as_deref(), a.lab_idle_timeout, on_idle, timer)?;
        let resolution = a.resolution.unwrap_or_else(|| {
            let d = IdlePlan::derived_resolution(a.min, a.max);
            crate::flags::note_default(
                format!("--resolution {}", humantime::format_duration(d)),
                "derived default: 5s, or half the range --max - --min when less, at least 1s; not given".into(),
            );
            d
        });
        let mut plan = IdlePlan::new(target, a.min, a.max, resolution, a.connections)?;
        plan.udp = a.udp;
        plan.server_first = a.server_first;
        plan.probe_data = a
            .probe_data
            .as_deref()
            .map(tpslab_plan::probe::ProbeData::parse)
            .transpose()?;
        plan.protocol = a.login.protocol();
        plan.check_protocol()?;
        let login = plan.protocol.map(|p| a.login.login(p)).transpose()?;
        if a.udp && !a.pool_config.is_empty() {
            bail!("--pool-config judges TCP connection pools: not with --udp");
        }
        let pools = a
            .pool_config
            .iter()
            .map(|p| tpslab_run::pool_config::read(p))
            .collect::<Result<Vec<_>>>()?;
        a.record.check(false)?;
        Ok(IdleSetup { plan, pools, login })
    }
}
