#!/usr/bin/env python3
"""An HTTP receiver for benchmarks: reads every request's body whole and answers 200 with an
empty body (what remote write, OTLP/HTTP, InfluxDB's v1 write, Circonus and a global's forward
endpoint take as delivered; `GET /health` answers 200 too), on 127.0.0.1:PORT, and prints the
bytes of bodies received when SECONDS have passed or it is sent SIGTERM.
Usage: bench/http_sink.py PORT SECONDS"""
import http.server
import signal
import sys
import threading
import time

port, seconds = int(sys.argv[1]), float(sys.argv[2])
received = [0]
lock = threading.Lock()


class Sink(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        length = int(self.headers.get("Content-Length", 0))
        body = self.rfile.read(length)
        with lock:
            received[0] += len(body)
        self.answer()

    do_PUT = do_POST

    def do_GET(self):
        self.answer()

    def answer(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Sink)
threading.Thread(target=server.serve_forever, daemon=True).start()
stopped = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stopped.set())
stopped.wait(seconds)
print(f"http sink received {received[0]} bytes", flush=True)
