//! The client wing: the load tpslab sends and the protocols it speaks. The open-loop UDP
//! generator ([`load`]); the closed loop's users multiplexed on epoll (`users`), counting
//! into `books` (a ramp's `tally`, an open loop's schedule), the event-loop core they and
//! the HTTP/2 loop share (`evloop`), the ramp over them ([`ramp`])
//! and the open loop over them ([`openloop`], with its HTTP/2 and HTTP/3 loops); the
//! request/reply protocols behind [`proto::Exchange`] (framed TCP, RESP, HTTP/1.1, HTTP/2's
//! frames with HPACK and Huffman, HTTP/3, TLS); the re-timing of replies held as by Nagle x
//! delayed ACK with TCP_QUICKACK ([`quickack`]); and one UDP run composed of the generator,
//! the observer and the reference server ([`udp_run`]).
//!
//! The wings depend one way: `lab` on this one, this one on `observe`, `serve` and `host`
//! (`tests/suite/import_graph.rs` refuses a cycle).

mod books;
mod evloop;
pub mod load;
pub mod openloop;
pub mod proto;
pub mod quickack;
pub mod ramp;
mod tally;
pub mod udp_run;
mod users;
