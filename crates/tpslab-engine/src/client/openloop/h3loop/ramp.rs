//! `ramp http --http3`: the HTTP/3 loop ([`super::run_loop`]) as a closed loop on a
//! ramp's tally.

use std::sync::Mutex;

use tpslab_plan::ramp::RampPlan;

use crate::client::tally::Tally;

/// `ramp http --http3`'s users (as `client::ramp`'s `h2_users` for HTTP/2) on `client`
/// (the QUIC client, the certificate's name and the request, of [`super::client`]): the
/// plan's QUIC connections, as many users on each as the last step has, each one stream in
/// flight at a time. Its client's datagrams are counted at its sockets; the server's socket
/// is not watched (that is `load http --http3`'s). A closed connection is given
/// [`super::CLOSE_SENT`] to send its CONNECTION_CLOSE, so the server does not hold it until
/// its idle timeout.
pub(crate) fn ramp_users<'a>(
    plan: &RampPlan,
    client: (quinn::ClientConfig, String, http::Request<()>),
    tally: &'a Tally<'a>,
) -> super::H3Run<'a, Tally<'a>> {
    let c = plan.connections.shared().unwrap_or(1);
    let max_users = *plan.steps.last().unwrap_or(&1);
    let (client, server_name, request) = client;
    super::H3Run {
        sched: tally,
        target: plan.target,
        client,
        server_name,
        request,
        body: bytes::Bytes::from(plan.request.clone()),
        connections: c,
        streams: max_users.div_ceil(c),
        quic: Mutex::new(Default::default()),
        sockets: Default::default(),
        close_sent: super::CLOSE_SENT,
    }
}
