//! The vdso of a live process (docs/design/stacks.md §1.4): it has no file,
//! so its pages are read from the process (`[vdso]` in `/proc/PID/maps`)
//! and parsed once per content: a thread stopped in `clock_gettime` is
//! unwound through the vdso's own `.eh_frame`.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use crate::elf::ElfObject;
use crate::image::{MappedObject, Memory};
use crate::maps::{load_bias, page_size, parse_maps};

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
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    let e = parse_maps(&maps)
        .into_iter()
        .find(|e| e.path.as_deref() == Some("[vdso]"))?;
    let len = e.end.checked_sub(e.start).filter(|&n| n > 0 && n <= MAX_VDSO)?;
    let mut bytes = vec![0u8; usize::try_from(len).ok()?];
    mem.read(e.start, &mut bytes).ok()?;
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
    let bias = load_bias(&file, e.start, 0, page_size())?;
    Some(MappedObject {
        file,
        bias,
        name: "[vdso]".to_string(),
        start: e.start,
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
