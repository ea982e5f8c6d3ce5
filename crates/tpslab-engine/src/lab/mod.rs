//! The lab wing: paths emulated and measured. The user-space delay line between two
//! network namespaces ([`link`]), the middlebox that forgets idle flows ([`middlebox`]),
//! `probe pool`'s connection pool across them ([`pool_lab`]), `probe idle` ([`idle`]: how
//! long a path lets a TCP connection idle, the lab's far side, the database logins), and
//! bulk TCP over a path, real or the delay line's ([`tcpflow`]: `tpslab tcp`'s sender
//! sampling TCP_INFO, and its sink).

pub mod idle;
pub mod link;
pub mod middlebox;
pub mod pool_lab;
pub mod tcpflow;
