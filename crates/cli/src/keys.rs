//! Key files: `weft keygen`, reading a private key file, and the server's
//! allow-list file, reloaded when it changes.

use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use weft::transform::{AllowList, KeyHex, StaticKey, parse_key_hex};

/// How often `weft serve` looks for a changed allow-list file.
pub(crate) const ALLOW_RELOAD_INTERVAL: Duration = Duration::from_secs(2);

/// Writes a new key pair: the private key (64 hex digits) to `path`,
/// created with mode 0600 and never over an existing file; returns the
/// public key as hex.
pub(crate) fn keygen(path: &Path) -> Result<String, String> {
    let key = StaticKey::generate().map_err(|e| e.to_string())?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    let private = key.private_bytes();
    let text = zeroize::Zeroizing::new(format!("{}\n", KeyHex(&private)));
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(KeyHex(&key.public_key()).to_string())
}

/// Reads a private key file written by `weft keygen`. Refuses a file that
/// others can read, as ssh does.
pub(crate) fn read_private_key(path: &Path) -> Result<StaticKey, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("key file {}: {e}", path.display()))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(format!(
            "key file {} is readable by others (mode {mode:03o}): chmod 600 it",
            path.display()
        ));
    }
    let text = zeroize::Zeroizing::new(
        std::fs::read_to_string(path).map_err(|e| format!("key file {}: {e}", path.display()))?,
    );
    let private = parse_key_hex(&text).map_err(|e| format!("key file {}: {e}", path.display()))?;
    Ok(StaticKey::from_private(private))
}

/// Parses a public key given on the command line.
pub(crate) fn parse_public_key(text: &str) -> Result<[u8; 32], String> {
    parse_key_hex(text).map_err(|e| format!("public key: {e}"))
}

fn read_allow(path: &Path) -> Result<Vec<[u8; 32]>, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("allow-list {}: {e}", path.display()))?;
    AllowList::parse_keys(&text).map_err(|e| format!("allow-list {}: {e}", path.display()))
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Loads the allow-list file and keeps it current: a task re-reads it
/// whenever its modification time changes (a bad edit keeps the previous
/// list and says why on stderr).
pub(crate) fn watched_allow_list(path: PathBuf) -> Result<AllowList, String> {
    let list = AllowList::new(read_allow(&path)?);
    let handle = list.clone();
    let mut seen = modified(&path);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(ALLOW_RELOAD_INTERVAL);
        loop {
            tick.tick().await;
            let now = modified(&path);
            if now == seen {
                continue;
            }
            seen = now;
            match read_allow(&path) {
                Ok(keys) => {
                    handle.replace(keys);
                    eprintln!("weft: reloaded {} ({} keys)", path.display(), handle.len());
                }
                Err(e) => eprintln!("weft: {e}; keeping the previous list"),
            }
        }
    });
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("weft-keys-{}-{name}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        dir
    }

    #[test]
    fn keygen_writes_a_0600_file_that_reads_back() {
        let path = temp("keygen");
        let public = keygen(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let key = read_private_key(&path).unwrap();
        assert_eq!(KeyHex(&key.public_key()).to_string(), public);
        // Never over an existing file.
        assert!(keygen(&path).unwrap_err().contains("cannot create"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = read_private_key(&path).unwrap_err();
        assert!(e.contains("readable by others"), "{e}");
        std::fs::remove_file(&path).unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn the_allow_list_file_is_reloaded_when_it_changes() {
        let path = temp("allow");
        let a = StaticKey::from_private([1; 32]).public_key();
        let b = StaticKey::from_private([2; 32]).public_key();
        std::fs::write(&path, format!("{} alice\n", KeyHex(&a))).unwrap();
        let list = watched_allow_list(path.clone()).unwrap();
        assert!(list.contains(&a) && !list.contains(&b));
        let first = modified(&path).unwrap();
        std::fs::write(&path, format!("# bob only\n{}\n", KeyHex(&b))).unwrap();
        // A later modification time than the first read, whatever the file
        // system's clock granularity (no real-time sleep for it).
        let file = std::fs::File::options().write(true).open(&path).unwrap();
        file.set_modified(first + Duration::from_secs(1)).unwrap();
        // The clock is paused: each sleep lets the watcher's interval tick.
        for _ in 0..200 {
            if list.contains(&b) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert!(list.contains(&b) && !list.contains(&a), "reloaded");
        std::fs::remove_file(&path).unwrap();
    }
}
