//! The vdso of a live process (docs/design/stacks.md §1.4): it has no file,
//! so its pages are read from the process (at `AT_SYSINFO_EHDR` of its
//! auxiliary vector: `/proc/PID/maps` of an MPI rank is hundreds of lines
//! the kernel formats for every read) and parsed once per content: a
//! thread stopped in `clock_gettime` is unwound through the vdso's own
//! `.eh_frame`.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use crate::elf::ElfObject;
use crate::image::{MappedObject, Memory};
use crate::maps::{load_bias, page_size};

/// A vdso larger than this is not one.
const MAX_VDSO: u64 = 1 << 20;

type Parsed = Mutex<HashMap<u64, Option<Arc<ElfObject>>>>;

fn parsed() -> &'static Parsed {
    static PARSED: OnceLock<Parsed> = OnceLock::new();
    PARSED.get_or_init(Default::default)
}

/// The vdso of live process `pid` as a mapped object, if it has one and it
/// can be read and parsed.
pub(crate) fn live_vdso(pid: i32, mem: &dyn Memory) -> Option<MappedObject> {
    let auxv = std::fs::read(format!("/proc/{pid}/auxv")).ok()?;
    let start = crate::auxv::auxv_value(&auxv, libc::AT_SYSINFO_EHDR, 8, true).filter(|&a| a != 0)?;
    // Its size: the end of the section headers, which come last.
    let mut ehdr = [0u8; 64];
    mem.read(start, &mut ehdr).ok()?;
    if &ehdr[..4] != b"\x7fELF" {
        return None;
    }
    let shoff = u64::from_le_bytes(ehdr[40..48].try_into().ok()?);
    let shentsize = u64::from(u16::from_le_bytes(ehdr[58..60].try_into().ok()?));
    let shnum = u64::from(u16::from_le_bytes(ehdr[60..62].try_into().ok()?));
    let len = shoff
        .checked_add(shentsize.checked_mul(shnum)?)
        .filter(|&n| n > 64 && n <= MAX_VDSO)?;
    let mut bytes = vec![0u8; usize::try_from(len).ok()?];
    mem.read(start, &mut bytes).ok()?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    let key = h.finish();
    let file = parsed()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(key)
        .or_insert_with(|| {
            // Kept for the run, as mapped files are: one per distinct vdso.
            let data: &'static [u8] = Vec::leak(bytes);
            ElfObject::parse(Path::new("[vdso]"), data).ok().map(Arc::new)
        })
        .clone()?;
    let bias = load_bias(&file, start, 0, page_size())?;
    Some(MappedObject {
        file,
        bias,
        name: "[vdso]".to_string(),
        start,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_vdso_is_found_with_its_unwind_information() {
        let me = crate::LiveProcess::open(std::process::id() as i32).unwrap();
        let Some(v) = live_vdso(std::process::id() as i32, me.memory()) else {
            eprintln!("skipping: no vdso here");
            return;
        };
        // SAFETY: getauxval has no preconditions.
        let ehdr = unsafe { libc::getauxval(libc::AT_SYSINFO_EHDR) };
        assert_eq!(v.start, ehdr);
        assert!(super::super::cfi::UnwindInfo::load(&v.file).unwrap().is_some());
        // Parsed once per content.
        let again = live_vdso(std::process::id() as i32, me.memory()).unwrap();
        assert!(Arc::ptr_eq(&v.file, &again.file));
    }
}
