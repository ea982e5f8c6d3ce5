//! The host wing: what tpslab reads of the host and sets on it. Facts for the record
//! ([`env`]), host settings applied for a run and always restored ([`guard`]), the sysctl
//! configuration `tpslab doctor` reads ([`hostconf`]), and what the kernel charges per
//! queued datagram ([`probe`]).

pub mod env;
pub mod guard;
pub mod hostconf;
pub mod probe;
