// Etsy statsd for bench/compare.sh: `node stats.js bench/peers/etsy-statsd.js` (npm package
// statsd). No graphiteHost: every flush computed, nothing sent, as histd.js.
{ port: 18127, address: '127.0.0.1', mgmt_port: 18137, flushInterval: 2000 }
