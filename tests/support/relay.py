"""A plain TCP relay in threads, standing between the gateway and a real HMS.

Tests take it down and bring it back (an HMS outage without restarting the JVM) or make it
hold each upstream reply for ``delay`` seconds (a slow HMS).
"""

from __future__ import annotations

import socket
import threading
import time

from tests.support.ports import reserve_port


class TcpRelay:
    """Relays ``127.0.0.1:port`` (default: a reserved port, :mod:`tests.support.ports`, so that
    it can come back on the same port after :meth:`stop`) to ``target``."""

    def __init__(self, target: tuple[str, int], port: int | None = None, *, delay: float = 0.0):
        self.target, self.port, self.delay = target, port or reserve_port(), delay
        self.server: socket.socket | None = None
        self.conns: list[socket.socket] = []
        self._lock = threading.Lock()

    def start(self) -> "TcpRelay":
        self.server = socket.create_server(("127.0.0.1", self.port), reuse_port=True)
        threading.Thread(target=self._accept, args=(self.server,), daemon=True).start()
        return self

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                client, _ = server.accept()
                upstream = socket.create_connection(self.target)
            except OSError:
                return
            with self._lock:
                self.conns += [client, upstream]
            threading.Thread(target=self._pipe, args=(client, upstream, 0.0), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, self.delay), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket, delay: float) -> None:
        try:
            while data := a.recv(65536):
                if delay:
                    time.sleep(delay)
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def stop(self) -> None:
        if self.server is not None:
            try:
                self.server.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept()
            except OSError:
                pass
            self.server.close()
            self.server = None
        with self._lock:
            conns, self.conns = self.conns, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
                s.close()
            except OSError:
                pass
