//! Files that hold a secret (`http.tokens.*`, `forward.tokenFile`, the Kafka SASL
//! `passwordFile`): read whole, refused when anyone on the host may write them (anyone could
//! add a credential of their own), and a warning logged when anyone may read them (issue 48,
//! P13: a token file of mode 0666 was read without a word).

use std::path::Path;

/// A file holding the bearer token a client sends (`forward.tokenFile`), read again whenever
/// its modification time or length changes: a token rotated in place is sent from the next
/// request on, without a reload. A file that cannot be read any more, or holds no token,
/// keeps the last good token in use (logged once until it reads again).
#[derive(Debug)]
pub struct TokenFile {
    path: std::path::PathBuf,
    key: &'static str,
    state: std::sync::Mutex<TokenState>,
}

#[derive(Debug)]
struct TokenState {
    /// The modification time and length the token was read at.
    stamp: Option<(std::time::SystemTime, u64)>,
    /// `Bearer TOKEN`.
    bearer: String,
    /// A reading failed and was logged.
    failing: bool,
}

impl TokenFile {
    /// Reads the token file at `path` (named by `key`); the reason when it cannot be read or
    /// holds no token.
    pub fn open(path: &Path, key: &'static str) -> Result<TokenFile, String> {
        let (stamp, bearer) = read_token(path, key)?;
        let state = std::sync::Mutex::new(TokenState { stamp, bearer, failing: false });
        Ok(TokenFile { path: path.to_path_buf(), key, state })
    }

    /// `Bearer TOKEN` with the token the file holds now (the last good one while it does not
    /// read).
    pub fn bearer(&self) -> String {
        let mut state = crate::lock(&self.state);
        if stamp_of(&self.path) != state.stamp {
            match read_token(&self.path, self.key) {
                Ok((stamp, bearer)) => {
                    if std::mem::take(&mut state.failing) || bearer != state.bearer {
                        tracing::info!(key = self.key, path = %self.path.display(), "the token file is read again: its token is sent from now on");
                    }
                    *state = TokenState { stamp, bearer, failing: false };
                }
                Err(why) if !state.failing => {
                    state.failing = true;
                    tracing::warn!(key = self.key, %why, "the token file does not read: the last token read is sent meanwhile");
                }
                Err(_) => {}
            }
        }
        state.bearer.clone()
    }
}

/// The file's modification time and length.
fn stamp_of(path: &Path) -> Option<(std::time::SystemTime, u64)> {
    let metadata = std::fs::metadata(path).ok()?;
    Some((metadata.modified().ok()?, metadata.len()))
}

/// The token of a token file (its first line that is not blank or a `#` comment; of a
/// `NAME TOKEN` line, the token), as `Bearer TOKEN`, with the file's stamp.
fn read_token(path: &Path, key: &str) -> Result<(Option<(std::time::SystemTime, u64)>, String), String> {
    let stamp = stamp_of(path);
    let text = read(path, key)?;
    let line = text.lines().map(str::trim).find(|line| !line.is_empty() && !line.starts_with('#'));
    match line.and_then(|line| line.split_whitespace().last()) {
        Some(token) => Ok((stamp, format!("Bearer {token}"))),
        None => Err(format!("{key}: {} holds no token", path.display())),
    }
}

/// Reads the secret file at `path`, which `key` names; the reason when it cannot be read or
/// anyone may write it.
pub fn read(path: &Path, key: &str) -> Result<String, String> {
    let text =
        std::fs::read_to_string(path).map_err(|error| format!("{key}: cannot read {}: {error}", path.display()))?;
    if let Some(mode) = mode_of(path) {
        match exposure(mode) {
            Exposure::Private => {}
            Exposure::Readable => tracing::warn!(
                key,
                path = %path.display(),
                mode = %format!("{mode:o}"),
                "a secret file others on this host may read: chmod 600 it (or 640 for the daemon's group)"
            ),
            Exposure::Writable => {
                return Err(format!(
                    "{key}: {} (mode {mode:o}) may be written by anyone on this host, who could add a credential: chmod 600 it",
                    path.display()
                ))
            }
        }
    }
    Ok(text)
}

/// The fewest different characters a secret (a token, a signing key) may hold:
/// `aaaaaaaaaaaaaaaa` is 16 characters and no secret.
pub const MIN_DISTINCT: usize = 8;

/// Whether `secret` is one word of at least `min_bytes` characters, [`MIN_DISTINCT`] of them
/// different; the reason when not (naming it `what`).
pub fn check_strength(secret: &str, min_bytes: usize, what: &str) -> Result<(), String> {
    let distinct = secret.bytes().collect::<std::collections::BTreeSet<u8>>().len();
    if secret.len() >= min_bytes && distinct >= MIN_DISTINCT && !secret.contains(char::is_whitespace) {
        return Ok(());
    }
    Err(format!(
        "{what} is one word of at least {min_bytes} characters, {MIN_DISTINCT} of them different (this one: {} characters, {distinct} different; `openssl rand -hex {min_bytes}` makes one)",
        secret.len()
    ))
}

/// Who else may touch a secret file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exposure {
    /// Its owner (and group) only.
    Private,
    /// Anyone may read it.
    Readable,
    /// Anyone may write it.
    Writable,
}

/// How exposed a file of `mode` (its permission bits) is to users outside its owner and group.
fn exposure(mode: u32) -> Exposure {
    match (mode & 0o002 != 0, mode & 0o004 != 0) {
        (true, _) => Exposure::Writable,
        (false, true) => Exposure::Readable,
        (false, false) => Exposure::Private,
    }
}

#[cfg(unix)]
fn mode_of(path: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).ok().map(|metadata| metadata.permissions().mode() & 0o777)
}

#[cfg(not(unix))]
fn mode_of(_path: &Path) -> Option<u32> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_long_and_varied_enough() {
        let cases = [
            ("0123456789abcdef", Ok(())),
            ("short", Err("5 characters")),
            ("aaaaaaaaaaaaaaaa", Err("1 different")),
            ("abababababababab", Err("2 different")),
            ("0123456789 abcdef", Err("one word")),
        ];
        for (secret, want) in cases {
            match (check_strength(secret, 16, "a token"), want) {
                (Ok(()), Ok(())) => {}
                (Err(why), Err(says)) => assert!(why.starts_with("a token") && why.contains(says), "{why}"),
                (got, want) => panic!("{secret}: {got:?}, wanted {want:?}"),
            }
        }
    }

    #[test]
    fn modes_are_judged_by_what_others_may_do() {
        let cases = [
            (0o600, Exposure::Private),
            (0o640, Exposure::Private),
            (0o660, Exposure::Private),
            (0o644, Exposure::Readable),
            (0o604, Exposure::Readable),
            (0o666, Exposure::Writable),
            (0o602, Exposure::Writable),
        ];
        for (mode, want) in cases {
            assert_eq!(exposure(mode), want, "{mode:o}");
        }
    }

    #[test]
    fn a_file_anyone_may_write_is_refused_naming_the_key() {
        use std::os::unix::fs::PermissionsExt;
        let path = std::env::temp_dir().join(format!("histd-secret-{}", std::process::id()));
        std::fs::write(&path, "web-1 0123456789abcdef\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read(&path, "http.tokens.write").unwrap(), "web-1 0123456789abcdef\n");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let refused = read(&path, "http.tokens.write").unwrap_err();
        assert!(refused.starts_with("http.tokens.write:") && refused.contains("chmod 600"), "{refused}");
        let _ = std::fs::remove_file(&path);
    }
}
