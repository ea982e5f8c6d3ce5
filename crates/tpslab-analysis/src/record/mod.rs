//! The record, re-exported from [`tpslab_record`] where it lives: one versioned JSON
//! document per command run ([`Record`], schema [`RECORD_SCHEMA`]), its metadata and a
//! body per kind. Kept so that `tpslab_analysis::record::...` paths stay valid; new code
//! names `tpslab_record` directly.

pub use tpslab_record::{
    AgentInfo, Body, DiagnoseRecord, DropReasons, Environment, GeneratorReport, LatencyHistograms,
    ListenSocket, MatchMode, Meta, NotVerified, ObserverReport, RampReport, Record, RecordError,
    RunRecord, Series, ServeRecord, ServerReport, SocketReader, SweepReport, TargetProcess,
    TargetSocket, TcpListen, TcpRecord, DIAGNOSE_SCHEMA_V1, READABLE_SCHEMAS, RECORD_SCHEMA,
    RUN_SCHEMA_V1,
};

/// The records of `tpslab tcp` and `serve tcp` ([`tpslab_record::tcp`]); judging a flow
/// is [`crate::tcp`].
pub mod tcp {
    pub use tpslab_record::tcp::{
        DirStats, Direction, FlowRecord, LabStats, ServeTcpRecord, TcpRecord, TcpRun, WatchedFlow,
        WatchedReport,
    };
}
