//! Where a thread is: in which MPI call (the outermost MPI entry point of
//! its stack), called from where in the application, or not in MPI at all;
//! and which threads are the MPI runtime's own (progress engines), which
//! say nothing about the application (docs/design/stacks.md §4.3).

use super::names::{canonical, classify, CallClass};
use super::python::{is_eval_frame, python_exit, python_site, PythonExit};
use crate::snapshot::model::{Frame, OsState, ThreadStack};

/// What a thread is doing, from its stack alone.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum Position {
    /// Inside an MPI call.
    InMpi {
        /// The entry point as the stack names it (`MPI_Recv`, `PMPI_Recv`,
        /// `mpi_recv_`).
        function: String,
        /// Its canonical name (`recv`).
        call: String,
        /// What such a call waits for.
        class: CallClass,
        /// The application frame that called it (`main (ring.c:64)`); in
        /// a Python program, the Python frame (`solve (solver.py:42)`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        caller: Option<String>,
        /// The call as the Python program wrote it (`comm.bcast`), when
        /// mpi4py's wrapper is on the stack.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        python_call: Option<String>,
        /// A Python program that has left its script: how it came to the
        /// interpreter's exit, which makes this call.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        python_exit: Option<PythonExit>,
        /// A call the application made through another library (HDF5,
        /// ScaLAPACK): that library's function it called, and its own frame
        /// ([`through`]). `None` when the application makes the call itself.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        through: Option<Through>,
    },
    /// In the application's code or a library of its own, not in MPI.
    NotInMpi {
        /// The innermost frame of the application (`main (ring.c:64)`,
        /// `compute (solver.c:12)`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<String>,
    },
    /// Inside the MPI library, in a function without a symbol, called
    /// from the application: an MPI call whose entry point left no frame
    /// (a stripped library's tail call, as MPICH's `PMPI_Waitany` makes).
    InMpiLibrary {
        /// The library's file name (`libmpi.so.12`).
        library: String,
        /// The application frame that called into it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        caller: Option<String>,
    },
    /// A thread of the MPI runtime (no application frame at all).
    Runtime,
}

/// Whether a frame is outside the C and MPI runtimes: in an application
/// object, or named without an object (a Python frame). A bare pc (no
/// object, no function: a host that could not place it) is nobody's frame.
pub fn outside_runtimes(f: &Frame) -> bool {
    match f.object.as_deref() {
        Some(o) => is_application_object(o),
        None => f.function.is_some(),
    }
}

/// The position of one thread.
pub fn position(t: &ThreadStack) -> Position {
    let app = outside_runtimes;
    if let Some((i, call)) = outermost_entry(t) {
        let f = &t.frames[i];
        let outer = beyond_recorder(&t.frames[i + 1..]);
        // In a Python program: the innermost Python frame, and mpi4py's
        // outermost wrapper between it and the call.
        let (py, python_call) = python_site(outer);
        let caller = match py {
            Some(j) => Some(frame_words(&outer[j])),
            None => outer.first().map(frame_words),
        };
        let python_exit = if py.is_none() { python_exit(outer) } else { None };
        // A Python program keeps its own words (the script's frame and
        // mpi4py's call): its interpreter is no library of the script's.
        let python = py.is_some() || python_exit.is_some() || t.frames.iter().any(is_eval_frame);
        let through = if python {
            None
        } else {
            through(&c_name(&call), &t.frames, outer)
        };
        return Position::InMpi {
            function: f.function.as_deref().unwrap_or_default().to_string(),
            class: classify(&call),
            call,
            caller: if python_exit.is_some() { None } else { caller },
            python_call,
            python_exit,
            through,
        };
    }
    if !t.frames.iter().any(app) {
        // Still starting: the dynamic loader runs the libraries'
        // initialisers before main (a network library's, looking at the
        // node's devices): the application's thread, not the runtime's.
        if let Some(at) = loading(t) {
            return Position::NotInMpi { at: Some(at) };
        }
        return Position::Runtime;
    }
    let inner = t.frames.iter().position(app);
    if let Some(j) = inner.filter(|&j| j > 0) {
        // Called into the MPI library: some frame inside the application's
        // innermost one is the library's.
        let lib = t.frames[..j].iter().rev().find_map(|f| {
            let o = f.object.as_deref()?;
            let file = o.rsplit('/').next().unwrap_or(o);
            is_mpi_library(file).then_some(file)
        });
        if let Some(lib) = lib {
            return Position::InMpiLibrary {
                library: lib.to_string(),
                caller: Some(frame_words(&t.frames[j])),
            };
        }
    }
    // The innermost frame of the application: the C runtime's frames above
    // it are named differently by every debugger and libc build.
    Position::NotInMpi {
        at: inner.map(|j| frame_words(&t.frames[j])),
    }
}

/// A thread in the dynamic loader's run of the libraries' initialisers,
/// before `main` (`_dl_init`, `call_init` of `ld-linux-x86-64.so.2`): "the
/// initialiser of libpsm2.so.2.2, before main (still starting)", naming
/// the outermost library between the loader and the innermost frame, when
/// one is not the C library's.
fn loading(t: &ThreadStack) -> Option<String> {
    let is_loader = |f: &Frame| {
        let o = f.object.as_deref().unwrap_or_default();
        let file = o.rsplit('/').next().unwrap_or(o);
        (file.starts_with("ld-linux") || file.starts_with("ld64.so") || file.starts_with("ld.so"))
            && matches!(f.function.as_deref(), Some("_dl_init" | "call_init" | "_dl_start_user"))
    };
    let at = t.frames.iter().position(is_loader)?;
    if t.frames.iter().any(|f| f.function.as_deref() == Some("main")) {
        return None;
    }
    let library = t.frames[..at]
        .iter()
        .rev()
        .filter_map(|f| f.object.as_deref())
        .map(|o| o.rsplit('/').next().unwrap_or(o))
        .find(|file| !file.starts_with("ld-") && !file.starts_with("libc.so") && !file.starts_with("libc-"));
    Some(match library {
        Some(lib) => format!("the initialiser of {lib}, before main (still starting)"),
        None => "a library's initialiser, before main (still starting)".to_string(),
    })
}

/// An MPI call the application made through another library: the
/// library's function the application called (`H5Dwrite`) and the
/// application's frame that called it (`write_field`, `app.c:41`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Through {
    /// The MPI call, in C (`MPI_Allreduce`).
    pub mpi_call: String,
    /// The library's function the application called: the outermost named
    /// frame between the application's frame and the MPI call.
    pub library_call: String,
    /// The file name of that function's object (`libhdf5_openmpi.so.103`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library: Option<String>,
    /// The application's function that called it.
    pub function: String,
    /// Its source file, as the debug information names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Its line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
}

impl Through {
    /// `H5Dwrite (write_field, app.c:41)`; `H5Dwrite (write_field)` without
    /// a line.
    pub fn words(&self) -> String {
        match (&self.file, self.line) {
            (Some(file), Some(line)) => {
                let base = file.rsplit('/').next().unwrap_or(file);
                format!("{} ({}, {base}:{line})", self.library_call, self.function)
            }
            _ => format!("{} ({})", self.library_call, self.function),
        }
    }
}

/// The executable of a thread: the object of its outermost frame outside
/// the system's and the MPI's libraries (`_start`, `main`, a thread's start
/// function).
fn executable(frames: &[Frame]) -> Option<&str> {
    frames
        .iter()
        .rev()
        .filter_map(|f| f.object.as_deref())
        .find(|o| is_application_object(o))
}

/// Whether a frame is the application's own: in the executable, or in an
/// object outside the system's and the MPI's libraries that has line
/// information for it (a library of the application's, built with `-g`).
/// A library installed without its debug information (Debian's HDF5,
/// ScaLAPACK) is not the application.
pub fn is_application_frame(f: &Frame, executable: Option<&str>) -> bool {
    match f.object.as_deref() {
        Some(o) => Some(o) == executable || (is_application_object(o) && f.file.is_some() && f.line.is_some()),
        None => false,
    }
}

/// The library call behind an MPI call made through another library, from
/// the frames outside the MPI entry point (`outer`, innermost first): the
/// first application frame ([`is_application_frame`]) and the outermost
/// named frame inside it. `None` when the application makes the call
/// itself (its frame is the entry point's caller) or no frame is the
/// application's.
fn through(mpi_call: &str, frames: &[Frame], outer: &[Frame]) -> Option<Through> {
    let exe = executable(frames);
    let app = outer.iter().position(|f| is_application_frame(f, exe))?;
    let lib = outer[..app].iter().rev().find(|f| f.function.is_some())?;
    let at = &outer[app];
    // A stripped executable's frame (a thin `main` that calls into the
    // code's own library, as LAMMPS's `lmp` into liblammps): nothing to
    // name it by, and the library is likely the application itself. The
    // innermost named frame made the call (below: no function, no
    // `Through`).
    let library = lib
        .object
        .as_deref()
        .map(|o| o.rsplit('/').next().unwrap_or(o).to_string());
    Some(Through {
        mpi_call: mpi_call.to_string(),
        library_call: short_name(lib.function.as_deref()?),
        library,
        function: short_name(at.function.as_deref()?),
        file: at.file.as_deref().map(str::to_string),
        line: at.line,
    })
}

/// A frame of mpiq's flight recorder (`LD_PRELOAD`ed by `mpiq run`): its
/// wrappers stand between the application and the MPI (a Fortran call's
/// C wrapper among them), and are nobody's call but mpiq's.
pub fn is_recorder_frame(f: &Frame) -> bool {
    f.object
        .as_deref()
        .map(|o| o.rsplit('/').next().unwrap_or(o))
        .is_some_and(|file| file.starts_with(super::RECORDER_LIBRARY_PREFIX))
}

/// The frames outside an MPI entry point, from the first that is not the
/// flight recorder's: its caller is the application's frame beyond them.
pub fn beyond_recorder(outer: &[Frame]) -> &[Frame] {
    let skip = outer.iter().take_while(|f| is_recorder_frame(f)).count();
    &outer[skip..]
}

/// Whether an object's file name is an MPI library's (`libmpi.so.40`,
/// `libmpich.so.12`).
pub fn is_mpi_library(file: &str) -> bool {
    file.starts_with("libmpi.so") || file.starts_with("libmpich.so")
}

/// The outermost MPI entry point of a thread (walking from `main` inwards,
/// the first): its index in the frames and the call's canonical name.
pub fn outermost_entry(t: &ThreadStack) -> Option<(usize, String)> {
    t.frames
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, f)| Some((i, entry_point(f)?)))
}

/// The canonical name of the MPI call a frame is in, if it is an entry
/// point: `MPI_X`, `PMPI_X` and the other spellings ([`canonical`]), and
/// MPICH's `internal_X`, the body of `PMPI_X` inlined into it (LLDB lists
/// the inlined function at the call's pc, not the function it is in).
pub fn entry_point(f: &Frame) -> Option<String> {
    let name = f.function.as_deref()?;
    // Open MPI's `PMPI_Init`/`PMPI_Finalize` tail-call these: no frame of
    // the entry point is left.
    if matches!(name, "ompi_mpi_finalize" | "ompi_mpi_init") && f.object.as_deref().is_some_and(in_mpi_library) {
        return canonical(if name == "ompi_mpi_init" {
            "MPI_Init"
        } else {
            "MPI_Finalize"
        });
    }
    if let Some(rest) = name.strip_prefix("internal_") {
        let object = f.object.as_deref().unwrap_or_default();
        let file = object.rsplit('/').next().unwrap_or(object);
        if file.starts_with("libmpi") {
            return canonical(&format!("MPI_{rest}"));
        }
    }
    canonical(name)
}

fn in_mpi_library(object: &str) -> bool {
    is_mpi_library(object.rsplit('/').next().unwrap_or(object))
}

/// The C binding's name of a canonical name: `wait` → `MPI_Wait`,
/// `comm_split` → `MPI_Comm_split`.
pub fn c_name(call: &str) -> String {
    let mut chars = call.chars();
    match chars.next() {
        Some(first) => format!("MPI_{}{}", first.to_ascii_uppercase(), chars.as_str()),
        None => "MPI_".to_string(),
    }
}

/// C runtime functions that return by themselves (a timeout): a thread in
/// them is computing, not blocked.
const TIMED: [&str; 6] = [
    "sleep",
    "sched_yield",
    "timedwait",
    "timedjoin",
    "clock_gettime",
    "gettimeofday",
];

/// C runtime functions that block until another party acts.
const BLOCKING: [&str; 17] = [
    "pause",
    "sigsuspend",
    "sigwait",
    "wait4",
    "waitpid",
    "waitid",
    "pthread_join",
    "clockjoin",
    "cond_wait",
    "sem_wait",
    "lll_lock_wait",
    "mutex_lock",
    "read",
    "recv",
    "accept",
    "poll",
    "select",
];

/// What a thread outside MPI is blocked in (`pause`, `pthread_join`), or
/// `None` if it computes: in its own code, or in a C runtime call that
/// returns by itself (a sleep, a timed wait). Told by function names, which
/// gdb, lldb and the CLI all give.
pub fn blocked_outside(t: &ThreadStack) -> Option<String> {
    // None when the innermost frame is the application's: it runs.
    let (lower, call) = runtime_call(t)?;
    lower
        .iter()
        .any(|n| BLOCKING.iter().any(|k| n.contains(k)) || n.contains("epoll_wait"))
        .then_some(call)
}

/// The names of a thread's innermost frames outside the application (the
/// C runtime's), in lower case, and the call the application made into
/// them (`__libc_pause` → `pause`); `None` when there are none or they
/// return by themselves (a sleep, a timed wait).
fn runtime_call(t: &ThreadStack) -> Option<(Vec<String>, String)> {
    let runtime: Vec<&str> = t
        .frames
        .iter()
        .take_while(|f| f.object.as_deref().is_some_and(|o| !is_application_object(o)))
        .filter_map(|f| f.function.as_deref())
        .collect();
    let outer = runtime_name(runtime.last()?);
    let lower: Vec<String> = runtime.iter().map(|n| n.to_ascii_lowercase()).collect();
    if lower.iter().any(|n| TIMED.iter().any(|k| n.contains(k))) {
        return None;
    }
    // The system call the runtime sleeps in, when it is not the call the
    // application made: `open` inside `fopen`.
    let inner = runtime.first().map(|n| runtime_name(n)).unwrap_or_default();
    let syscall_like = !inner.is_empty() && inner.len() <= 12 && !inner.contains('_');
    let call = if syscall_like && inner != outer {
        format!("{inner} (in {outer})")
    } else {
        outer
    };
    Some((lower, call))
}

/// A C runtime function's name as a person knows it: glibc's internal
/// prefixes and suffixes off (`__GI___libc_open64` → `open64`,
/// `__fopen_internal` → `fopen`, `__open_nocancel` → `open`).
fn runtime_name(name: &str) -> String {
    let mut n = name.trim_start_matches('_');
    n = n.strip_prefix("GI_").unwrap_or(n).trim_start_matches('_');
    n = n.strip_prefix("libc_").unwrap_or(n);
    n = n.strip_suffix("_internal").unwrap_or(n);
    n = n.strip_suffix("_nocancel").unwrap_or(n);
    n.to_string()
}

/// What a thread outside MPI sleeps in, when the kernel says it sleeps
/// (`os.state` `S`, or `D`: an uninterruptible sleep, in a file system or a
/// device): the C runtime call the application made, whatever it is (an
/// `open` of a file that never opens, a `write` to a full pipe), not only
/// the calls [`blocked_outside`] knows; where no frame of the C runtime is
/// on the stack (a static executable, whose C library is its own code; a
/// system call made by the application itself), the system call the
/// kernel names (`os.syscall`). `None` when it does not sleep, or its call
/// returns by itself (a sleep, a timed wait).
pub fn asleep_outside(t: &ThreadStack, os: &OsState) -> Option<String> {
    if os.state != "S" && os.state != "D" {
        return None;
    }
    let call = match runtime_call(t) {
        Some((_, call)) => call,
        None if innermost_is_application(t) => os.syscall.clone()?,
        None => return None,
    };
    Some(if os.state == "D" {
        format!("{call} (an uninterruptible sleep: a file system or a device)")
    } else {
        call
    })
}

/// The innermost frame is in the application's code (no C runtime frame
/// below it).
fn innermost_is_application(t: &ThreadStack) -> bool {
    t.frames
        .first()
        .and_then(|f| f.object.as_deref())
        .is_some_and(is_application_object)
}

/// `function (file:line)`, `function`, or the pc.
fn frame_words(f: &Frame) -> String {
    // Never an address: it differs in every rank (ASLR), and ranks at the
    // same place must read alike. As the merged stacks say it.
    let name = match &f.function {
        Some(name) => short_name(name),
        None => f.unnamed(),
    };
    match (&f.file, f.line) {
        (Some(file), Some(line)) => {
            let base = file.rsplit('/').next().unwrap_or(file);
            format!("{name} ({base}:{line})")
        }
        _ => name,
    }
}

/// A function's name as its author wrote it, for words: a C++ name
/// without its argument list, qualifiers or clone suffix
/// (`LAMMPS_NS::Verlet::run(int) const [clone .constprop.0]` →
/// `LAMMPS_NS::Verlet::run`); gfortran's module procedure
/// `__solver_MOD_smooth` as `solver::smooth`, and `MAIN__` as `the main
/// program`. Anything else as it is.
pub fn short_name(name: &str) -> String {
    if name == "MAIN__" {
        return "the main program".into();
    }
    if let Some(rest) = name.strip_prefix("__") {
        if let Some((module, proc_)) = rest.split_once("_MOD_") {
            if !module.is_empty() && !proc_.is_empty() && !name.contains('(') {
                return format!("{module}::{proc_}");
            }
        }
    }
    let mut n = name.trim();
    if let Some(at) = n.find(" [clone ") {
        n = n[..at].trim_end();
    }
    for qualifier in [" const", " volatile", " &&", " &", " noexcept"] {
        n = n.strip_suffix(qualifier).unwrap_or(n);
    }
    if !n.ends_with(')') {
        return n.to_string();
    }
    // The '(' that opens the last, outermost argument list.
    let mut depth = 0usize;
    for (i, c) in n.char_indices().rev() {
        match c {
            ')' => depth += 1,
            '(' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    let head = &n[..i];
                    // `operator()` keeps its own parentheses; a name that
                    // is all argument list (a bare pc) stays whole.
                    // (`std::function<void ()>::operator()`: a name
                    // without arguments, the parentheses the operator's.)
                    return if head.is_empty() || head.ends_with("operator") {
                        n.to_string()
                    } else {
                        head.to_string()
                    };
                }
            }
            _ => {}
        }
    }
    n.to_string()
}

/// Whether an object is the application's: not the C runtime and not the
/// MPI runtime (by the file name, as the MPIs and Debian install them).
pub fn is_application_object(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or(path);
    const SYSTEM: [&str; 37] = [
        "libc.so",
        "libc-",
        "ld-linux",
        "libpthread",
        "libgcc_s",
        "libstdc++",
        // The Fortran and OpenMP runtimes: a Fortran program's write, an
        // OpenMP barrier, are theirs, the call the program made is its own.
        "libgfortran",
        "libquadmath",
        "libgomp",
        "libm.so",
        "libdl",
        "librt",
        "[vdso]",
        "linux-vdso",
        "libmpi",
        "libopen-pal",
        "libopen-rte",
        "libpmix",
        "libevent",
        "libhwloc",
        "libmpich",
        "libmpl",
        "libfabric",
        "libucp",
        "libucs",
        // The rest of UCX and the network libraries MPIs load.
        "libuct",
        "libucm",
        "libibverbs",
        "librdmacm",
        "libnuma",
        "libpsm",
        "libnl-",
        "libprrte",
        "libopen-",
        "libze_",
        "libcuda",
        // mpiq's own flight recorder, between the application and the MPI.
        "libmpiq_recorder",
    ];
    !(SYSTEM.iter().any(|s| file.starts_with(s))
        || file.starts_with("mca_")
        || path.contains("/openmpi/")
        || path.contains("/mpich/")
        || path.contains("/pmix/"))
}

/// One line for a process: where its threads are, the runtime's left out.
pub fn where_words(threads: &[ThreadStack]) -> String {
    where_words_calls(threads, &[])
}

/// [`where_words`], with what the calls' arguments say (a Python script's
/// exit status).
pub fn where_words_calls(threads: &[ThreadStack], calls: &[crate::snapshot::model::MpiCall]) -> String {
    let mut parts = Vec::new();
    // In the kernel's order (the main thread first), whatever the host's.
    let mut sorted: Vec<&ThreadStack> = threads.iter().collect();
    sorted.sort_by_key(|t| t.tid);
    for t in sorted {
        match position(t) {
            Position::InMpi { through: Some(via), .. } => {
                // Through a library: the application's call into it, then
                // the MPI call it makes.
                parts.push(format!("in {} > {}", via.words(), via.mpi_call));
            }
            Position::InMpi {
                call,
                caller,
                python_call,
                python_exit,
                ..
            } => {
                // One spelling for every front end and binding (gdb may
                // name Open MPI's `MPI_Wait` by its alias `PMPI_Wait`).
                let mut name = c_name(&call);
                if let Some(p) = python_call {
                    name = format!("{name} ({p})");
                }
                let status = calls.iter().find(|c| c.tid == t.tid).and_then(|c| c.python_exit_status);
                parts.push(match (caller, python_exit) {
                    (_, Some(exit)) => format!("in {name}, {}", super::python::exit_words(status, exit)),
                    (Some(c), None) => format!("in {name}, called from {c}"),
                    (None, None) => format!("in {name}"),
                })
            }
            Position::NotInMpi { at } => parts.push(match at {
                Some(a) => format!("not in MPI, in {a}"),
                None => "not in MPI".to_string(),
            }),
            Position::InMpiLibrary { caller, .. } => parts.push(match caller {
                Some(c) => format!("in MPI (a call without a symbol), called from {c}"),
                None => "in MPI (a call without a symbol)".to_string(),
            }),
            Position::Runtime => {}
        }
    }
    if parts.is_empty() {
        return "no application thread".to_string();
    }
    if parts.len() == 1 {
        return parts.remove(0);
    }
    parts
        .iter()
        .enumerate()
        .map(|(i, p)| format!("thread {}: {p}", i + 1))
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stacks::names::Collective;

    fn frame(function: &str, object: &str, file: Option<(&str, u32)>) -> Frame {
        Frame {
            pc: "0x1".into(),
            function: Some(function.into()),
            object: Some(object.into()),
            file: file.map(|(f, _)| f.into()),
            line: file.map(|(_, l)| l),
            inlined: false,
            offset: None,
            python: false,
        }
    }

    fn thread(frames: Vec<Frame>) -> ThreadStack {
        ThreadStack {
            tid: 1,
            frames,
            ..ThreadStack::default()
        }
    }

    #[test]
    fn the_outermost_entry_point_and_its_caller() {
        let t = thread(vec![
            frame("__poll", "/lib/x86_64-linux-gnu/libc.so.6", None),
            frame("opal_progress", "/opt/ompi/lib/libopen-pal.so.40", None),
            frame("ompi_coll_base_barrier_intra", "/opt/ompi/lib/libmpi.so.40", None),
            frame("PMPI_Barrier", "/opt/ompi/lib/libmpi.so.40", None),
            frame("MPI_Barrier", "/opt/tool/libprofile.so", None),
            frame("main", "/opt/u/solver", Some(("/opt/u/solver.c", 88))),
        ]);
        match position(&t) {
            Position::InMpi {
                function,
                call,
                class,
                caller,
                ..
            } => {
                assert_eq!((function.as_str(), call.as_str()), ("MPI_Barrier", "barrier"));
                assert_eq!(
                    class,
                    CallClass::Collective {
                        kind: Collective::Synchronising
                    }
                );
                assert_eq!(caller.as_deref(), Some("main (solver.c:88)"));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(where_words(&[t]), "in MPI_Barrier, called from main (solver.c:88)");
        assert_eq!(c_name("comm_split"), "MPI_Comm_split");
    }

    /// Debian's HDF5 (no line information) between the application and
    /// the MPI call, as gdb showed it on a rank of `hdf5_skip`.
    fn through_hdf5() -> ThreadStack {
        const HDF5: &str = "/lib/x86_64-linux-gnu/libhdf5_openmpi.so.103";
        const LIBMPI: &str = "/lib/x86_64-linux-gnu/libmpi.so.40";
        const APP: &str = "/work/examples/hdf5_skip";
        thread(vec![
            frame("ompi_coll_base_barrier_intra_basic_linear", LIBMPI, None),
            frame("PMPI_Barrier", LIBMPI, None),
            frame("H5AC__run_sync_point", HDF5, None),
            frame("H5F__dest", HDF5, None),
            Frame {
                function: None,
                ..frame("", HDF5, None)
            },
            frame("H5Fclose", HDF5, None),
            frame("finish", APP, Some(("/work/examples/hdf5_skip.c", 59))),
            frame("main", APP, Some(("/work/examples/hdf5_skip.c", 98))),
            frame("__libc_start_main_impl", "/lib/x86_64-linux-gnu/libc.so.6", None),
            frame("_start", APP, None),
        ])
    }

    #[test]
    fn a_call_through_a_library_names_the_applications_call_into_it() {
        let t = through_hdf5();
        let Position::InMpi { caller, through, .. } = position(&t) else {
            panic!("{:?}", position(&t));
        };
        assert_eq!(caller.as_deref(), Some("H5AC__run_sync_point"));
        let via = through.expect("through HDF5");
        assert_eq!(via.mpi_call, "MPI_Barrier");
        assert_eq!(via.library_call, "H5Fclose");
        assert_eq!(via.library.as_deref(), Some("libhdf5_openmpi.so.103"));
        assert_eq!(via.function, "finish");
        assert_eq!(via.line, Some(59));
        assert_eq!(where_words(&[t]), "in H5Fclose (finish, hdf5_skip.c:59) > MPI_Barrier");
    }

    #[test]
    fn what_counts_as_the_application() {
        // A library of the application's own with line information is the
        // application: the call is its own, the words as before.
        let own = thread(vec![
            frame("PMPI_Allreduce", "/usr/lib/libmpi.so.40", None),
            frame("norm", "/opt/u/libsolver.so", Some(("solver/norm.c", 12))),
            frame("main", "/opt/u/app", Some(("app.c", 7))),
            frame("_start", "/opt/u/app", None),
        ]);
        assert_eq!(where_words(&[own]), "in MPI_Allreduce, called from norm (norm.c:12)");
        // The executable is the application, line information or not.
        let stripped = thread(vec![
            frame("PMPI_Allreduce", "/usr/lib/libmpi.so.40", None),
            frame("Cdgsum2d", "/usr/lib/libscalapack-openmpi.so.2.2", None),
            frame("sum_norms", "/opt/u/app", None),
            frame("main", "/opt/u/app", None),
        ]);
        assert_eq!(where_words(&[stripped]), "in Cdgsum2d (sum_norms) > MPI_Allreduce");
        // A C++ runtime frame between: the system's libraries are not the
        // application either.
        let cxx = thread(vec![
            frame("MPI_Barrier", "/usr/lib/libmpi.so.40", None),
            frame("std::function<void ()>::operator()", "/usr/lib/libstdc++.so.6", None),
            frame("run", "/opt/u/app", Some(("app.cc", 30))),
        ]);
        assert_eq!(
            where_words(&[cxx]),
            "in std::function<void ()>::operator() (run, app.cc:30) > MPI_Barrier"
        );
        // No frame of the application (a truncated stack): the immediate
        // caller, as before.
        let cut = thread(vec![
            frame("PMPI_Barrier", "/usr/lib/libmpi.so.40", None),
            frame("H5AC__run_sync_point", "/usr/lib/libhdf5_openmpi.so.103", None),
        ]);
        assert_eq!(where_words(&[cut]), "in MPI_Barrier, called from H5AC__run_sync_point");
    }

    #[test]
    fn mpich_inlined_bodies_are_their_calls() {
        let t = thread(vec![
            frame("MPIR_Wait", "/opt/mpich/lib/libmpi.so.12", None),
            frame("internal_Wait", "/opt/mpich/lib/libmpi.so.12", None),
            frame("main", "/opt/u/deadlock", Some(("deadlock.c", 45))),
        ]);
        assert_eq!(where_words(&[t]), "in MPI_Wait, called from main (deadlock.c:45)");
        let elsewhere = thread(vec![
            frame("internal_helper", "/opt/u/app", None),
            frame("main", "/opt/u/app", None),
        ]);
        assert!(matches!(position(&elsewhere), Position::NotInMpi { .. }));
    }

    #[test]
    fn threads_outside_mpi_and_the_runtimes_own() {
        let main = thread(vec![
            frame("__libc_pause", "/lib/x86_64-linux-gnu/libc.so.6", Some(("pause.c", 29))),
            frame("main", "/work/ring", Some(("ring.c", 64))),
        ]);
        let progress = thread(vec![
            frame("epoll_wait", "/lib/x86_64-linux-gnu/libc.so.6", None),
            frame("event_base_loop", "/lib/x86_64-linux-gnu/libevent_core-2.1.so.7", None),
            frame("progress_engine", "/opt/ompi/lib/openmpi/mca_pmix_pmix3x.so", None),
            frame("start_thread", "/lib/x86_64-linux-gnu/libc.so.6", None),
        ]);
        assert_eq!(
            position(&main),
            Position::NotInMpi {
                at: Some("main (ring.c:64)".into())
            }
        );
        assert_eq!(position(&progress), Position::Runtime);
        // Still starting (CI's Open MPI 5 rank at 5 s): libpsm2's
        // initialiser, run by the dynamic loader before main.
        let ld = "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2";
        let mut psm2 = frame("", "/usr/lib/x86_64-linux-gnu/libpsm2.so.2.2", None);
        psm2.function = None;
        let starting = thread(vec![
            frame("sched_setaffinity", "/usr/lib/x86_64-linux-gnu/libc.so.6", None),
            psm2,
            frame("call_init", ld, None),
            frame("_dl_init", ld, None),
        ]);
        assert_eq!(
            position(&starting),
            Position::NotInMpi {
                at: Some("the initialiser of libpsm2.so.2.2, before main (still starting)".into())
            }
        );
        assert_eq!(
            where_words(&[starting]),
            "not in MPI, in the initialiser of libpsm2.so.2.2, before main (still starting)"
        );
        assert_eq!(where_words(&[main, progress]), "not in MPI, in main (ring.c:64)");
        assert_eq!(where_words(&[]), "no application thread");
    }

    #[test]
    fn names_read_as_their_authors_wrote_them() {
        for (name, short) in [
            (
                "LAMMPS_NS::CommBrick::reverse_comm()",
                "LAMMPS_NS::CommBrick::reverse_comm",
            ),
            (
                "LAMMPS_NS::Verlet::run(int) const [clone .constprop.0]",
                "LAMMPS_NS::Verlet::run",
            ),
            (
                "std::vector<int, std::allocator<int> >::push_back(int const&)",
                "std::vector<int, std::allocator<int> >::push_back",
            ),
            (
                "(anonymous namespace)::halo(double*, int)",
                "(anonymous namespace)::halo",
            ),
            ("Functor::operator()(int) const", "Functor::operator()"),
            (
                "std::function<void ()>::operator()",
                "std::function<void ()>::operator()",
            ),
            ("__solver_MOD_smooth", "solver::smooth"),
            ("MAIN__", "the main program"),
            ("main", "main"),
            ("smooth", "smooth"),
            ("PMPI_Send", "PMPI_Send"),
        ] {
            assert_eq!(short_name(name), short, "{name}");
        }
    }

    #[test]
    fn a_frame_without_a_symbol_is_its_object_never_its_address() {
        let f = Frame {
            pc: "0x55eaa10851fd".into(),
            function: None,
            object: Some("/usr/bin/lmp".into()),
            ..Frame::default()
        };
        assert_eq!(frame_words(&f), "?? (lmp)");
        // With its offset in the object: the same in every rank, and what
        // addr2line takes.
        let at = |pc: &str| Frame {
            pc: pc.into(),
            offset: Some(0x4f2a0),
            ..f.clone()
        };
        assert_eq!(frame_words(&at("0x55eaa10851fd")), "lmp+0x4f2a0");
        assert_eq!(frame_words(&at("0x5612b3c4a2a0")), frame_words(&at("0x55eaa10851fd")));
        assert_eq!(
            crate::render::frame_text(&at("0x1")),
            "0x1 in lmp+0x4f2a0 from /usr/bin/lmp"
        );
    }
}
