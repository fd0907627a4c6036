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
}

/// An Etsy key, with Etsy's meaning and default.
pub const fn etsy(keys: &'static [&'static str], default: &'static str, meaning: &'static str) -> KeyDoc {
    KeyDoc { keys, default, meaning, origin: Origin::Etsy }
}

/// A key of histd's own.
pub const fn histd(keys: &'static [&'static str], default: &'static str, meaning: &'static str) -> KeyDoc {
    KeyDoc { keys, default, meaning, origin: Origin::Histd }
}

/// An Etsy key histd accepts and does not use; `why` says why.
pub const fn unused(keys: &'static [&'static str], why: &'static str) -> KeyDoc {
    KeyDoc { keys, default: "", meaning: why, origin: Origin::EtsyUnused }
}
