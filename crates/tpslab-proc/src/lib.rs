//! Pure parsers of Linux `/proc` text files into typed snapshots.
//!
//! Every parser takes already-opened input (`impl BufRead` or `&str`) plus a
//! `file` label that is only used in error messages; parsers never touch the
//! filesystem. The [`live`] module has thin wrappers that read the real files.
//!
//! Parsers are tolerant of kernel differences: unknown extra columns are
//! ignored and missing trailing columns become `None` or `0` as documented
//! per field. Malformed input yields a [`ParseError`] naming the file and the
//! 1-based line number; parsers never panic.

mod common;
pub mod dev;
pub mod ethtool;
pub mod kallsyms;
pub mod live;
pub mod locks;
pub mod meminfo;
pub mod netstat;
pub mod pid;
pub mod pool_conf;
pub mod snmp;
pub mod softnet;
pub mod stat;
pub mod syscall;
pub mod sysctl_conf;
pub mod tracefs;
pub mod tree;
pub mod udp;

pub use common::ParseError;
pub use dev::{parse_dev, NetDev};
pub use live::ProcError;
pub use pid::{
    parse_cpu_list, parse_schedstat, parse_status, parse_task_stat, SchedStat, TaskStat, TaskStatus,
};
pub use snmp::{parse_snmp, parse_snmp6, Snmp, Snmp6, UdpCounters};
pub use softnet::{parse_softnet, SoftnetCpu};
pub use stat::{parse_stat, CpuTimes, KernelStat};
pub use udp::{parse_udp, UdpSocket};
