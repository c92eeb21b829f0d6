//! Opening a live process: stop it ([`crate::ptrace`]), read
//! `/proc/PID/maps`, open every mapped ELF object through the cache, and
//! compute load biases.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::auxv::auxv_value;
use crate::cache::open_object;
use crate::elf::{ElfError, ElfObject};
use crate::image::{MappedObject, ProcessImage};
use crate::maps::{group_files, load_bias, page_size, parse_maps, FileMapping};
use crate::memory::ProcMemory;
use crate::process::Process;
use crate::ptrace::{AttachError, Attachment};

/// A live process.
pub type LiveProcess = Process<ProcMemory>;

/// Why a live process could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LiveError {
    /// Stopping it failed.
    #[error(transparent)]
    Attach(#[from] AttachError),
    /// `/proc/PID/maps` could not be read.
    #[error("cannot read /proc/{pid}/maps: {source}")]
    Maps {
        /// The process.
        pid: i32,
        /// What the OS said.
        source: std::io::Error,
    },
}

/// Reads `AT_ENTRY` from `/proc/PID/auxv` (native word size and order).
fn auxv_entry(proc_dir: &str) -> Option<u64> {
    let data = std::fs::read(format!("{proc_dir}/auxv")).ok()?;
    auxv_value(&data, 9, 8, true)
}

/// The ways to open a file a process has mapped, best first: its path
/// (when it still names the same inode), the path inside the process's root
/// (containers), and the `map_files` link to the very file that is mapped.
fn candidates(proc_dir: &str, f: &FileMapping) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if !f.deleted {
        out.push(PathBuf::from(&f.path));
        out.push(PathBuf::from(format!("{proc_dir}/root{}", f.path)));
    }
    out.push(PathBuf::from(format!(
        "{proc_dir}/map_files/{:x}-{:x}",
        f.first_range.0, f.first_range.1
    )));
    out
}

fn open_mapped(proc_dir: &str, f: &FileMapping, inode: u64) -> Result<Arc<ElfObject>, Arc<ElfError>> {
    let mut first_err = None;
    let mut fallback = None;
    for path in candidates(proc_dir, f) {
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if meta.ino() != inode && inode != 0 {
            // A different file now has that name (upgraded library, another
            // mount namespace). Keep as a last resort: overlay filesystems
            // report different inode numbers in maps and stat.
            fallback.get_or_insert(path);
            continue;
        }
        match open_object(&path) {
            Ok(o) => return Ok(o),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    if let Some(path) = fallback {
        return open_object(&path);
    }
    Err(first_err.unwrap_or_else(|| {
        Arc::new(ElfError::Io {
            path: PathBuf::from(&f.path),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        })
    }))
}

/// `pid`, or when its main thread is a zombie, a thread that is not.
fn live_thread(pid: i32) -> i32 {
    let zombie = |dir: &str| {
        std::fs::read_to_string(format!("{dir}/stat"))
            .ok()
            .and_then(|s| s.rsplit_once(')').map(|(_, r)| r.trim_start().starts_with('Z')))
            .unwrap_or(false)
    };
    if !zombie(&format!("/proc/{pid}")) {
        return pid;
    }
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .find(|tid| !zombie(&format!("/proc/{pid}/task/{tid}")))
        .unwrap_or(pid)
}

impl LiveProcess {
    /// Stops every thread of `pid` and opens it. The process stays stopped
    /// until [`Process::detach`] or drop.
    pub fn attach(pid: i32) -> Result<LiveProcess, LiveError> {
        Self::open_stopped(Attachment::attach(pid)?)
    }

    /// Opens the process `attachment` stopped (see [`Attachment::attach`]):
    /// a caller with many processes stops them all first, then opens them.
    pub fn open_stopped(attachment: Attachment) -> Result<LiveProcess, LiveError> {
        let mut p = Self::open(attachment.pid())?;
        p.attachment = Some(attachment);
        Ok(p)
    }

    /// Opens `pid` without stopping it (reads may then see memory change).
    pub fn open(pid: i32) -> Result<LiveProcess, LiveError> {
        let maps_err = |source| LiveError::Maps { pid, source };
        // A main thread that called pthread_exit is a zombie without an
        // address space: read through a thread that still has one.
        let tid = live_thread(pid);
        let proc_dir = if tid == pid {
            format!("/proc/{pid}")
        } else {
            format!("/proc/{pid}/task/{tid}")
        };
        let text = std::fs::read_to_string(format!("{proc_dir}/maps")).map_err(maps_err)?;
        let entries = parse_maps(&text);
        let page = page_size();
        let entry = auxv_entry(&proc_dir);
        let exe_link = std::fs::read_link(format!("{proc_dir}/exe")).ok();
        let mut objects = Vec::new();
        let mut warnings = Vec::new();
        let mut exe = None;
        for f in group_files(&entries) {
            let inode = entries
                .iter()
                .find(|e| e.path.as_deref() == Some(f.path.as_str()))
                .map_or(0, |e| e.inode);
            let file = match open_mapped(&proc_dir, &f, inode) {
                Ok(o) => o,
                Err(e) if matches!(*e, ElfError::NotElf(_)) => continue,
                Err(e) => {
                    warnings.push(e.to_string());
                    continue;
                }
            };
            let Some(bias) = load_bias(&file, f.lowest_offset.0, f.lowest_offset.1, page) else {
                warnings.push(format!("{}: no PT_LOAD at the mapped offset", f.path));
                continue;
            };
            let is_exe = match entry {
                Some(at_entry) => file.entry() != 0 && file.entry().wrapping_add(bias) == at_entry,
                None => exe_link.as_deref() == Some(Path::new(&f.path)),
            };
            if is_exe && exe.is_none() {
                exe = Some(objects.len());
            }
            objects.push(MappedObject {
                file,
                bias,
                name: f.path.clone(),
                start: f.start,
            });
        }
        let executable = exe
            .map(|i| objects[i].name.clone())
            .or_else(|| exe_link.map(|p| p.display().to_string()))
            .unwrap_or_default();
        // Sort first so the executable index matches ProcessImage's order.
        let exe_start = exe.map(|i| objects[i].start);
        objects.sort_by_key(|o| o.start);
        let exe = exe_start.and_then(|s| objects.iter().position(|o| o.start == s));
        let mem = ProcMemory::new(tid);
        let image = ProcessImage::new(objects, exe, &mem);
        Ok(Process {
            pid: Some(pid as u32),
            executable,
            image,
            mem,
            world_rank: None,
            attachment: None,
            core_threads: Vec::new(),
            core_file: None,
            core_python_maps: Vec::new(),
            warnings,
            unwound: None,
            os: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_itself_without_stopping() {
        let me = LiveProcess::open(std::process::id() as i32).unwrap();
        let exe = me.image().executable().expect("executable found");
        assert_eq!(
            std::fs::canonicalize(&exe.name).unwrap(),
            std::fs::canonicalize("/proc/self/exe").unwrap()
        );
        // libc is mapped and found in load order after the executable.
        assert!(me.image().find_function("malloc").is_some());
    }
}
