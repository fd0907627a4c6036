// histd for bench/compare.sh -c 12099: Etsy's graphite backend sending every flush to the carbon
// stand-in compare.sh starts on port 12099 (bench/carbon_sink.py, which reads everything), a 2 s
// flush, and half of the buffer compare.sh grants (SO_RCVBUFFORCE is doubled).
{ port: 18125, address: '127.0.0.1', mgmt_port: 18135, http_port: 0, flushInterval: 2000,
  udpReceiveBufferBytes: 8388608, graphiteHost: '127.0.0.1', graphitePort: 12099,
  graphite: { legacyNamespace: true } }
