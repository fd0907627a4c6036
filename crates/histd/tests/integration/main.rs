//! The integration tests: daemons started in this process (`histd::start`) or as the real
//! binary (signals, standard output, process memory), real sockets on 127.0.0.1, a test carbon.

mod admin;
mod alerts;
mod backends;
mod budgets;
mod circonus;
mod clients;
mod concurrency;
mod config_files;
mod edges;
mod external;
mod faults;
mod fleet_on_one_machine;
mod fleet_view;
mod forwarding;
mod fuzz_seeds;
mod graphite_output;
mod harness;
mod influx;
mod kafka;
mod lifecycle;
mod listeners;
mod otlp;
mod prometheus;
mod proxy;
mod reload;
mod soak;
mod store_api;
mod timer_histograms;
mod top;
