//! The file backend: each flush appended to a file you can `tail`, ship and replay, in
//! Net::Statsd::Server's File format (`c<TAB>name<TAB>value`, `g`, `s` with the members,
//! `t<TAB>name.<stat><TAB>value`) or as JSON lines (one object per series, a timer's
//! circllhist in base64). One write per flush; rotated by size (`file.maxBytes`,
//! `file.keep`); reopened when logrotate moves or removes it. Errors are counted in `stats`
//! (`file.errors`, `file.dropped_points.rejected`) and never block ingest.

pub mod config;
pub mod encode;
mod sink;
#[cfg(test)]
mod tests;

pub use config::FileConfig;
pub use sink::spawn;
