"""An OTLP/HTTP metrics receiver for the integration tests: every request to /v1/metrics is
gunzipped when its Content-Encoding says so and decoded with the official OpenTelemetry proto
definitions (PyPI opentelemetry-proto), then written as one JSON line (MessageToDict) to the
file given. Any bytes that do not decode are answered 400 and logged as {"error": ...}.

    otlp_receiver.py PORT OUT_FILE [--fail-first N] [--reject-points N] [--tls CERT KEY]

--fail-first N answers the first N requests 503 with Retry-After: 1 (nothing written);
--reject-points N reports N rejected points as a partial success in every 200 answer;
--tls CERT KEY serves https with that certificate chain and key (PEM files).
"""

import gzip
import json
import ssl
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2

PORT = int(sys.argv[1])
OUT = sys.argv[2]
FAIL_FIRST = int(sys.argv[sys.argv.index("--fail-first") + 1]) if "--fail-first" in sys.argv else 0
REJECT = int(sys.argv[sys.argv.index("--reject-points") + 1]) if "--reject-points" in sys.argv else 0
seen = {"requests": 0}


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        seen["requests"] += 1
        if seen["requests"] <= FAIL_FIRST:
            self.answer(503, b"busy", {"Retry-After": "1"})
            return
        try:
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            request = metrics_service_pb2.ExportMetricsServiceRequest()
            request.ParseFromString(body)
            record = {
                "path": self.path,
                "content_type": self.headers.get("Content-Type"),
                "request": MessageToDict(request),
            }
        except Exception as error:  # a request that does not decode is the test's failure
            record = {"error": repr(error)}
            self.write(record)
            self.answer(400, repr(error).encode(), {})
            return
        self.write(record)
        response = metrics_service_pb2.ExportMetricsServiceResponse()
        if REJECT:
            response.partial_success.rejected_data_points = REJECT
            response.partial_success.error_message = "test rejects some points"
        self.answer(200, response.SerializeToString(), {"Content-Type": "application/x-protobuf"})

    def write(self, record):
        with open(OUT, "a") as out:
            out.write(json.dumps(record) + "\n")

    def answer(self, status, body, headers):
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", PORT), Receiver)
if "--tls" in sys.argv:
    at = sys.argv.index("--tls")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(sys.argv[at + 1], sys.argv[at + 2])
    server.socket = context.wrap_socket(server.socket, server_side=True)
print("ready", flush=True)
server.serve_forever()
