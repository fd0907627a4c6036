//! The integration tests: the real `histd` binary, real sockets on 127.0.0.1, a test carbon.

mod admin;
mod backends;
mod concurrency;
mod config_files;
mod graphite_output;
mod harness;
mod hostile_input;
mod lifecycle;
mod listeners;
mod store_api;
mod timer_histograms;
