#!/usr/bin/env python3
"""A small HTTP/3 server on aioquic (a QUIC and HTTP/3 stack in Python, independent of
quic-go and of quinn) for tests/suite/http3_aioquic.rs. Usage:

    h3_aioquic.py PORT CERT KEY

It listens on 127.0.0.1:PORT (UDP) with the certificate and key (PEM) and answers every
request once it is whole (its stream ended): `/busy` with 503 and "busy", any other path
with 200 and "hello", each with its content-length. It never sets its socket's buffer
(asyncio's datagram endpoint keeps the kernel's default), so a loss at its receive buffer
is a socket on net.core.rmem_default.
Its one thread reads, decrypts and answers: a slow server next to Caddy.
"""

import asyncio
import sys

from aioquic.asyncio import serve
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ProtocolNegotiated


class Hello(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = None
        # stream id -> its request's :path, until the request is whole
        self.paths = {}

    def quic_event_received(self, event):
        # Once per connection: a second H3Connection would forget the first's streams.
        if (
            self.h3 is None
            and isinstance(event, ProtocolNegotiated)
            and event.alpn_protocol in H3_ALPN
        ):
            self.h3 = H3Connection(self._quic)
        if self.h3 is None:
            return
        for e in self.h3.handle_event(event):
            # Answered once the request is whole (its stream ended), as a server that reads
            # a request's body does. aioquic 1.2 loses the FIN of a stream whose last frame
            # is of an unknown type: a client that ends a request with a GREASE frame (RFC
            # 9114 7.2.8; the h3 crate's does unless told not to) is never answered here.
            if isinstance(e, HeadersReceived):
                self.paths[e.stream_id] = dict(e.headers).get(b":path", b"/")
                if e.stream_ended:
                    self.answer(e.stream_id)
            elif isinstance(e, DataReceived) and e.stream_ended:
                self.answer(e.stream_id)

    def answer(self, stream_id):
        path = self.paths.pop(stream_id, b"/")
        status, body = (b"503", b"busy") if path == b"/busy" else (b"200", b"hello")
        self.h3.send_headers(
            stream_id,
            [(b":status", status), (b"content-length", str(len(body)).encode())],
        )
        self.h3.send_data(stream_id, body, end_stream=True)
        self.transmit()


async def main(port, cert, key):
    config = QuicConfiguration(is_client=False, alpn_protocols=H3_ALPN)
    config.load_cert_chain(cert, key)
    await serve("127.0.0.1", port, configuration=config, create_protocol=Hello)
    await asyncio.Future()


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: h3_aioquic.py PORT CERT KEY")
    asyncio.run(main(int(sys.argv[1]), sys.argv[2], sys.argv[3]))
