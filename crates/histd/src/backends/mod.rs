//! The backends in force: which sinks run for a config, started, restarted and retired as
//! reloads change it. This layer sits above the sinks (each knows only its own settings) and
//! the config (which assembles every section).

mod roster;

pub use roster::Roster;
