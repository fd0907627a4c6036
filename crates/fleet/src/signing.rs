//! Proof of a batch's source on Kafka (issue 48, P4): anyone who can produce to the topic
//! could otherwise send a batch under a local's identity first and have the real one dropped
//! as a duplicate. A local with `forward.kafka.signingKeyFile` puts an HMAC-SHA256 of each
//! message's body under its key in the message's `histd-signature` header; a global with
//! `global.kafka.signingKeys` (a file of `SOURCE KEY` lines, one per local) merges a batch only
//! when its header is the HMAC of its body under the key of the source the batch names, and
//! remembers identities per source.

use std::path::Path;

use ::ring::hmac;

/// The Kafka message header that carries a batch's signature.
pub const HEADER: &str = "histd-signature";

/// The shortest signing key taken.
pub const MIN_KEY_BYTES: usize = 32;

/// A local's signing key.
#[derive(Clone)]
pub struct SigningKey(hmac::Key);

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningKey(..)")
    }
}

impl SigningKey {
    /// A key from its secret text; the reason when it is too short or too plain.
    pub fn new(secret: &str) -> Result<SigningKey, String> {
        crate::secret_file::check_strength(secret, MIN_KEY_BYTES, "a signing key")?;
        Ok(SigningKey(hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes())))
    }

    /// Reads `forward.kafka.signingKeyFile`: its first line that is not blank or a `#`
    /// comment (a `NAME KEY` line gives the key).
    pub fn read(path: &Path) -> Result<SigningKey, String> {
        let text = crate::secret_file::read(path, "forward.kafka.signingKeyFile")?;
        let line = text.lines().map(str::trim).find(|line| !line.is_empty() && !line.starts_with('#'));
        let secret = line.and_then(|line| line.split_whitespace().last());
        let secret = secret.ok_or_else(|| format!("forward.kafka.signingKeyFile: {} holds no key", path.display()))?;
        SigningKey::new(secret).map_err(|why| format!("forward.kafka.signingKeyFile: {}: {why}", path.display()))
    }

    /// The signature of `body`.
    pub fn sign(&self, body: &[u8]) -> Vec<u8> {
        hmac::sign(&self.0, body).as_ref().to_vec()
    }
}

/// The keys a global checks batches with, by source.
#[derive(Debug, Clone, Default)]
pub struct SourceKeys(Vec<(String, SigningKey)>);

/// Why a batch's proof of source does not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unproven {
    /// No `histd-signature` header.
    Unsigned,
    /// No key for the source the batch names.
    UnknownSource(String),
    /// The signature is not the body's under the source's key.
    Forged(String),
}

impl std::fmt::Display for Unproven {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unproven::Unsigned => write!(f, "the batch is not signed ({HEADER} header)"),
            Unproven::UnknownSource(source) => {
                write!(f, "no signing key for source '{source}' (global.kafka.signingKeys)")
            }
            Unproven::Forged(source) => write!(f, "the signature is not source '{source}''s"),
        }
    }
}

impl SourceKeys {
    /// The keys of these sources.
    pub fn new(keys: Vec<(String, SigningKey)>) -> SourceKeys {
        SourceKeys(keys)
    }

    /// Reads `global.kafka.signingKeys`: `SOURCE KEY` a line (the local's `forward.source`
    /// and the key in its `forward.kafka.signingKeyFile`); blank lines and `#` comments skipped.
    pub fn read(path: &Path) -> Result<SourceKeys, String> {
        let text = crate::secret_file::read(path, "global.kafka.signingKeys")?;
        let mut keys = Vec::new();
        for (number, line) in text.lines().enumerate().map(|(i, line)| (i + 1, line.trim())) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (source, secret) = line.split_once(char::is_whitespace).ok_or_else(|| {
                format!("global.kafka.signingKeys: {} line {number}: expected `SOURCE KEY`", path.display())
            })?;
            let key = SigningKey::new(secret.trim())
                .map_err(|why| format!("global.kafka.signingKeys: {} line {number}: {why}", path.display()))?;
            keys.push((source.to_string(), key));
        }
        if keys.is_empty() {
            return Err(format!("global.kafka.signingKeys: {} holds no key", path.display()));
        }
        Ok(SourceKeys(keys))
    }

    /// Whether `signature` is `body`'s under the key of `source` (compared in constant time).
    pub fn check(&self, source: &str, body: &[u8], signature: Option<&[u8]>) -> Result<(), Unproven> {
        let signature = signature.ok_or(Unproven::Unsigned)?;
        let (_, key) = self
            .0
            .iter()
            .find(|(name, _)| name == source)
            .ok_or_else(|| Unproven::UnknownSource(source.to_string()))?;
        hmac::verify(&key.0, body, signature).map_err(|_| Unproven::Forged(source.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WEB1: &str = "6f1d2c3b4a5968778695a4b3c2d1e0f1";
    const WEB2: &str = "a1b2c3d4e5f60718293a4b5c6d7e8f90";

    /// The source a batch names, its body, the signature it carries, what the check says.
    type Case<'a> = (&'a str, &'a [u8], Option<&'a [u8]>, Result<(), Unproven>);

    #[test]
    fn only_the_sources_own_key_proves_a_batch() {
        let keys = SourceKeys(vec![
            ("web-1".into(), SigningKey::new(WEB1).unwrap()),
            ("web-2".into(), SigningKey::new(WEB2).unwrap()),
        ]);
        let body = b"a batch";
        let by_web1 = SigningKey::new(WEB1).unwrap().sign(body);
        let by_web2 = SigningKey::new(WEB2).unwrap().sign(body);
        let cases: [Case; 6] = [
            ("web-1", body, Some(&by_web1), Ok(())),
            ("web-1", body, Some(&by_web2), Err(Unproven::Forged("web-1".into()))),
            ("web-1", b"another batch", Some(&by_web1), Err(Unproven::Forged("web-1".into()))),
            ("web-1", body, None, Err(Unproven::Unsigned)),
            ("web-3", body, Some(&by_web1), Err(Unproven::UnknownSource("web-3".into()))),
            ("web-1", body, Some(&by_web1[..16]), Err(Unproven::Forged("web-1".into()))),
        ];
        for (source, body, signature, want) in cases {
            assert_eq!(keys.check(source, body, signature), want, "{source} {body:?}");
        }
    }

    #[test]
    fn weak_keys_are_refused() {
        for weak in ["short", &"a".repeat(40), &"ab".repeat(20)] {
            assert!(SigningKey::new(weak).is_err(), "{weak}");
        }
        assert!(SigningKey::new(WEB1).is_ok());
    }
}
