//! Loading a debug library once per process, after checking that the file
//! is an ELF shared object for this host.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use super::DllError;
use crate::ffi::{Library, OpenError};

static LOADED: OnceLock<Mutex<HashMap<PathBuf, &'static Library>>> = OnceLock::new();

/// Loads (once) and checks the library at `path`.
pub fn load(path: &Path) -> Result<&'static Library, DllError> {
    let shown = path.display().to_string();
    let canonical = std::fs::canonicalize(path).map_err(|e| DllError::Unreadable {
        path: shown.clone(),
        reason: e.to_string(),
    })?;
    let map = LOADED.get_or_init(Default::default);
    let mut map = map.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(dll) = map.get(&canonical) {
        return Ok(dll);
    }
    check_elf(&canonical, &shown)?;
    let lib = Library::open(&canonical, path).map_err(|e| match e {
        OpenError::LoadFailed(reason) => DllError::LoadFailed {
            path: shown.clone(),
            reason,
        },
        OpenError::MissingEntryPoint(symbol) => DllError::MissingEntryPoint {
            symbol: symbol.to_string(),
            path: shown.clone(),
        },
        OpenError::Incompatible(reason) => DllError::Incompatible {
            path: shown.clone(),
            reason,
        },
    })?;
    let lib: &'static Library = Box::leak(Box::new(lib));
    map.insert(canonical, lib);
    Ok(lib)
}

/// Checks that `path` is a regular file holding an ELF shared object of this
/// host's class, byte order and machine.
fn check_elf(path: &Path, shown: &str) -> Result<(), DllError> {
    let unreadable = |e: std::io::Error| DllError::Unreadable {
        path: shown.to_string(),
        reason: e.to_string(),
    };
    let meta = std::fs::metadata(path).map_err(unreadable)?;
    let wrong = |found: String| DllError::WrongFormat {
        path: shown.to_string(),
        found,
        expected: format!("an ELF shared object for {}", host_machine().1),
    };
    if !meta.is_file() {
        return Err(wrong("not a regular file".into()));
    }
    let mut header = [0u8; 20];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut header))
        .map_err(unreadable)?;
    if n < 20 || &header[..4] != b"\x7fELF" {
        return Err(wrong("a file that is not ELF".into()));
    }
    let class = header[4];
    let little = header[5] == 1;
    let rd16 = |o: usize| {
        let b = [header[o], header[o + 1]];
        if little {
            u16::from_le_bytes(b)
        } else {
            u16::from_be_bytes(b)
        }
    };
    let (e_type, e_machine) = (rd16(16), rd16(18));
    let want_class = if cfg!(target_pointer_width = "64") { 2 } else { 1 };
    let (want_machine, host_name) = host_machine();
    let found_desc = format!(
        "ELF{} {} {} (type {})",
        if class == 2 { 64 } else { 32 },
        if little { "little-endian" } else { "big-endian" },
        machine_name(e_machine),
        match e_type {
            1 => "relocatable object",
            2 => "executable",
            3 => "shared object",
            4 => "core file",
            _ => "unknown",
        }
    );
    if class != want_class || little != cfg!(target_endian = "little") || e_machine != want_machine || e_type != 3 {
        let _ = host_name;
        return Err(wrong(found_desc));
    }
    Ok(())
}

fn host_machine() -> (u16, &'static str) {
    if cfg!(target_arch = "x86_64") {
        (62, "x86_64 (ELF64, little-endian)")
    } else if cfg!(target_arch = "aarch64") {
        (183, "aarch64 (ELF64, little-endian)")
    } else if cfg!(target_arch = "powerpc64") {
        (21, "ppc64")
    } else if cfg!(target_arch = "riscv64") {
        (243, "riscv64")
    } else {
        (0, std::env::consts::ARCH)
    }
}

fn machine_name(m: u16) -> String {
    match m {
        3 => "i386".into(),
        40 => "ARM".into(),
        62 => "x86_64".into(),
        183 => "aarch64".into(),
        21 => "ppc64".into(),
        243 => "riscv".into(),
        other => format!("machine {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_non_elf_and_executables() {
        let dir = std::env::temp_dir().join(format!("mpiq-dll-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let text = dir.join("notes.txt");
        std::fs::write(&text, b"hello, this is not a library").unwrap();
        let e = load(&text).unwrap_err();
        assert!(matches!(e, DllError::WrongFormat { .. }), "{e}");
        assert!(e.to_string().contains("not ELF"), "{e}");
        let e = load(&dir.join("missing.so")).unwrap_err();
        assert!(matches!(e, DllError::Unreadable { .. }), "{e}");
        // An executable is ELF but not a shared object... unless PIE; /bin/true
        // on Debian is PIE (ET_DYN), so use a directory for "not a file".
        let e = load(&dir).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn refuses_a_shared_object_without_entry_points() {
        // libm is a shared object everywhere but exports no mqs_* symbols.
        let libm = ["/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .expect("libm.so.6 (this test runs on x86_64 Debian)");
        let e = load(Path::new(libm)).unwrap_err();
        assert!(
            matches!(
                e,
                DllError::MissingEntryPoint { ref symbol, .. } if symbol == "mqs_setup_basic_callbacks"
            ),
            "{e}"
        );
    }
}
