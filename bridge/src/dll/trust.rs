//! The trust policy for libraries the *target* names: a target can name any
//! file, and loading a library runs its code in this process.

use std::path::Path;

use super::DllError;

/// Whether the user allowed target-named libraries through `MPIQ_TRUST_DLL`:
/// `1`/`all`/`yes` trusts every library, otherwise a `:`-separated list of
/// files or directories.
fn trusted_by_env(canonical: &Path) -> bool {
    let Some(v) = std::env::var_os("MPIQ_TRUST_DLL") else {
        return false;
    };
    let v = v.to_string_lossy();
    if matches!(v.trim(), "1" | "all" | "yes" | "true") {
        return true;
    }
    v.split(':')
        .filter(|s| !s.is_empty())
        .any(|entry| std::fs::canonicalize(entry).is_ok_and(|e| canonical == e || canonical.starts_with(&e)))
}

/// Checks that a library the *target* named may be loaded: a regular file
/// owned by root or by the user running mpiq, not writable by group or
/// others, in a directory not writable by others (checked on the resolved
/// path) — unless the user allowed it with `MPIQ_TRUST_DLL`.
pub fn check_trusted(path: &Path) -> Result<(), DllError> {
    use std::os::unix::fs::MetadataExt;
    let shown = path.display().to_string();
    let untrusted = |reason: String| DllError::Untrusted {
        path: shown.clone(),
        reason,
    };
    let canonical = std::fs::canonicalize(path).map_err(|e| DllError::Unreadable {
        path: shown.clone(),
        reason: e.to_string(),
    })?;
    if trusted_by_env(&canonical) {
        return Ok(());
    }
    let me = effective_uid().ok_or_else(|| untrusted("cannot tell which user runs mpiq (/proc/self/status)".into()))?;
    let meta = std::fs::metadata(&canonical).map_err(|e| untrusted(e.to_string()))?;
    if !meta.is_file() {
        return Err(untrusted("it is not a regular file".into()));
    }
    if meta.uid() != 0 && meta.uid() != me {
        return Err(untrusted(format!(
            "it is owned by uid {}, neither root nor you (uid {me})",
            meta.uid()
        )));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(untrusted(format!(
            "it is writable by {} (mode {:o})",
            if meta.mode() & 0o002 != 0 {
                "everyone"
            } else {
                "its group"
            },
            meta.mode() & 0o7777
        )));
    }
    if let Some(dir) = canonical.parent() {
        let d = std::fs::metadata(dir).map_err(|e| untrusted(e.to_string()))?;
        if d.mode() & 0o002 != 0 {
            return Err(untrusted(format!(
                "its directory {} is writable by everyone (mode {:o})",
                dir.display(),
                d.mode() & 0o7777
            )));
        }
    }
    Ok(())
}

/// This process's effective user id, from `/proc/self/status` (its `Uid:`
/// line: real, effective, saved, filesystem).
fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn target_named_libraries_must_be_private_files() {
        let dir = std::env::temp_dir().join(format!("mpiq-trust-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let lib = dir.join("libplanted.so");
        std::fs::write(&lib, b"x").unwrap();
        std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(check_trusted(&lib), Ok(()));
        std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = check_trusted(&lib).unwrap_err();
        assert!(e.to_string().contains("writable by everyone"), "{e}");
        assert!(e.to_string().contains("MPIQ_TRUST_DLL"), "{e}");
        std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = check_trusted(&lib).unwrap_err();
        assert!(e.to_string().contains("directory"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
