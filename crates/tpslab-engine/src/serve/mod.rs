//! The serve wing: tpslab's reference servers and what they share with the load. UDP
//! ([`server`]: the S1 workload, N threads with a SO_REUSEPORT socket each), the datagram
//! header the generator writes and the server echoes ([`wire`]), send errors counted by
//! errno ([`counters`]); TCP or HTTP request/response ([`rr`], with the framing rules; its
//! HTTP/1.1 side in `rr_http`). Bulk TCP's sink lives with its sender in
//! [`crate::lab::tcpflow`], `probe idle`'s responder in [`crate::lab::idle`].

pub mod counters;
pub mod rr;
mod rr_http;
pub mod server;
pub mod wire;
