"""The listening socket: replies leave at once (TCP_NODELAY on every accepted connection)."""

from __future__ import annotations

import asyncio
import socket

from together_clusters.emulator.server import bind_socket


def _nodelay_of_accepted_connection(listening: socket.socket) -> int:
    """Serve ``listening`` with asyncio, as uvicorn does, and read TCP_NODELAY of an accepted connection."""

    async def main() -> int:
        accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            conn = writer.get_extra_info("socket")
            accepted.set_result(conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(on_connection, sock=listening)
        async with server:
            host, port = listening.getsockname()[:2]
            _, writer = await asyncio.open_connection(host, port)
            try:
                return await asyncio.wait_for(accepted, timeout=10)
            finally:
                writer.close()

    return asyncio.run(main())


def test_accepted_connections_have_nagle_off() -> None:
    # Without it every small reply waits for the client's delayed ACK (about 40 ms on Linux).
    assert _nodelay_of_accepted_connection(bind_socket("127.0.0.1", 0)) != 0
