//! The documentation of a config key: its spellings, default, meaning and origin. Each module
//! that reads a section documents its keys beside the code (`config/keys.rs` gathers them into
//! README's table).

/// Who defined a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Etsy statsd's key, with Etsy's meaning and default.
    Etsy,
    /// histd's own.
    Histd,
    /// Etsy's key that histd accepts and does not use (the meaning says why).
    EtsyUnused,
}

/// One documented key.
#[derive(Debug, Clone, Copy)]
pub struct KeyDoc {
    /// Its spellings: the path as read (`graphite.globalPrefix`; `[]` stands for any array
    /// index, `servers[].port`), first the one README shows first.
    pub keys: &'static [&'static str],
    /// The default, as a user would write it.
    pub default: &'static str,
    /// What it does.
    pub meaning: &'static str,
    /// Whose key it is.
    pub origin: Origin,
    /// For a backend's key: what a reload does when it changes.
    pub on_reload: OnReload,
}

/// What a reload (SIGHUP, `POST /-/reload`) does when a backend's key changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnReload {
    /// A sink with the new settings takes the running one's place (docs/operations.md).
    RestartsItsSink,
    /// The running sink takes it, without a restart (the key table says so).
    InPlace,
}

impl KeyDoc {
    /// The same key, applied to a running sink in place by a reload.
    pub const fn in_place(self) -> KeyDoc {
        KeyDoc { on_reload: OnReload::InPlace, ..self }
    }
}

/// An Etsy key, with Etsy's meaning and default.
pub const fn etsy(keys: &'static [&'static str], default: &'static str, meaning: &'static str) -> KeyDoc {
    KeyDoc { keys, default, meaning, origin: Origin::Etsy, on_reload: OnReload::RestartsItsSink }
}

/// A key of histd's own.
pub const fn histd(keys: &'static [&'static str], default: &'static str, meaning: &'static str) -> KeyDoc {
    KeyDoc { keys, default, meaning, origin: Origin::Histd, on_reload: OnReload::RestartsItsSink }
}

/// An Etsy key histd accepts and does not use; `why` says why.
pub const fn unused(keys: &'static [&'static str], why: &'static str) -> KeyDoc {
    KeyDoc { keys, default: "", meaning: why, origin: Origin::EtsyUnused, on_reload: OnReload::RestartsItsSink }
}
