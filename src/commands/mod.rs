//! Each command's run: its validated plan (`tpslab_cli`) through its workflow
//! (`tpslab_run`), then the record's epilogue (`crate::out::emit`). No command calls
//! another's module.

pub(crate) mod agent;
pub(crate) mod bdp;
pub(crate) mod capacity;
pub(crate) mod compare_cmd;
pub(crate) mod diagnose;
pub(crate) mod doctor;
pub(crate) mod fleet;
pub(crate) mod history_cmd;
pub(crate) mod load_http;
pub(crate) mod probe;
pub(crate) mod ramp;
pub(crate) mod report_cmd;
pub(crate) mod serve_tcp;
pub(crate) mod sweep;
pub(crate) mod tcp;
pub(crate) mod udp;
