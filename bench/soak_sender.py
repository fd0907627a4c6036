#!/usr/bin/env python3
"""The soak benchmark's client: for SECONDS, about RATE lines a second over UDP to
127.0.0.1:PORT, 25 to a datagram: counters, timers (with a DogStatsD tag) and gauges whose names
churn (each minute brings CHURN new names and the oldest go idle), plus 200 stable names.
Prints the lines sent. Usage: bench/soak_sender.py PORT SECONDS RATE CHURN"""
import socket
import sys
import time

port, seconds, rate, churn = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
started = time.time()
sent = 0
sequence = 0
while True:
    now = time.time()
    elapsed = now - started
    if elapsed >= seconds:
        break
    minute = int(elapsed // 60)
    lines = []
    for _ in range(25):
        sequence += 1
        k = sequence % 10
        if k < 2:  # stable names
            lines.append(f"soak.stable.{sequence % 200}:1|c")
        elif k < 6:  # this minute's churning counters
            lines.append(f"soak.churn.m{minute}.n{sequence % churn}:1|c")
        elif k < 9:  # timers, tagged
            lines.append(f"soak.latency:{sequence % 997}|ms|#route:r{sequence % 20}")
        else:
            lines.append(f"soak.gauge.m{minute}.n{sequence % (churn // 10 + 1)}:{sequence % 100}|g")
    sock.sendto("\n".join(lines).encode(), ("127.0.0.1", port))
    sent += len(lines)
    # pace to RATE lines a second
    ahead = sent / rate - (time.time() - started)
    if ahead > 0:
        time.sleep(ahead)
print(sent)
