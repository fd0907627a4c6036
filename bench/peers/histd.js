// histd for bench/compare.sh: Etsy's graphite backend without a host (every flush computed,
// nothing sent), a 2 s flush, and half of the buffer compare.sh grants (SO_RCVBUFFORCE is doubled).
{ port: 18125, address: '127.0.0.1', mgmt_port: 18135, http_port: 0, flushInterval: 2000,
  udpReceiveBufferBytes: 8388608 }
