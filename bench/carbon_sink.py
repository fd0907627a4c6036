#!/usr/bin/env python3
"""A carbon stand-in for benchmarks: accepts plaintext connections on 127.0.0.1:PORT, reads
and discards everything, and prints the bytes received when SECONDS have passed or it is
sent SIGTERM.
Usage: bench/carbon_sink.py PORT SECONDS"""
import signal
import socket
import sys
import threading
import time

port, seconds = int(sys.argv[1]), float(sys.argv[2])
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", port))
server.listen(8)
server.settimeout(0.5)
received = [0]


def drain(connection):
    while True:
        data = connection.recv(1 << 20)
        if not data:
            return
        received[0] += len(data)


deadline = time.time() + seconds
stopped = [False]
signal.signal(signal.SIGTERM, lambda *_: stopped.__setitem__(0, True))
while time.time() < deadline and not stopped[0]:
    try:
        connection, _ = server.accept()
    except socket.timeout:
        continue
    threading.Thread(target=drain, args=(connection,), daemon=True).start()
print(f"carbon stand-in received {received[0]} bytes", flush=True)
