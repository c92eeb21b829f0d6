//! The Python example programs (`examples/python/*.py`, run with mpi4py), and where a
//! rank's main thread is, by gdb's backtrace.
//!
//! ```no_run
//! use mpiq_tests::{Job, Mpi, PyExample};
//!
//! // `mpiexec -n 3 <venv>/bin/python examples/python/raise_before_bcast.py`, waiting for
//! // every rank's `MPIQ-READY` line.
//! let job = Job::python(Mpi::Mpich, PyExample::RaiseBeforeBcast).nprocs(3).start();
//! let frames = mpiq_tests::python::wait_in(job.pid_of(1), &["MPI_Finalize"], std::time::Duration::from_secs(30));
//! assert!(frames.iter().any(|f| f == "MPI_Finalize"));
//! ```

use std::fmt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::{examples_source_dir, gdb, Mpi};

/// One Python example program, `examples/python/<name>.py`, run as `python <script>` with the
/// [`Mpi::python`] of the job's MPI. Each script's docstring documents where every rank waits
/// and its designed verdict; `examples/README.md` has the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PyExample {
    /// `raise_before_bcast.py` (n >= 3): rank 1 raises `RuntimeError` before its
    /// `comm.bcast(data, root=1)` and waits in `MPI_Finalize` (mpi4py's exit handler); the
    /// others wait in `MPI_Bcast` (MPICH: the large-count `MPI_Bcast_c`) with root 1 (the line marked `# mpiq: bcast`, in `solve`).
    RaiseBeforeBcast,
    /// `p2p_cycle.py` (n >= 2): every rank in `comm.recv(source=(r + 1) % n, tag=7)` (the line
    /// marked `# mpiq: recv`, in `exchange`) before it sends: a receive cycle. mpi4py's pickled
    /// receive probes first, so the ranks sit in `MPI_Mprobe`.
    P2pCycle,
    /// `healthy_loop.py` (n >= 2): `comm.allreduce`, a ring `comm.sendrecv` and a 50 ms sleep,
    /// forever (until killed); prints `MPIQ-PROGRESS rank=<r> step=<s>` every 10 steps.
    HealthyLoop,
}

impl PyExample {
    /// Every Python example, in a stable order.
    pub const ALL: [PyExample; 3] = [PyExample::RaiseBeforeBcast, PyExample::P2pCycle, PyExample::HealthyLoop];

    /// The file stem: `examples/python/<name>.py`.
    pub const fn name(self) -> &'static str {
        match self {
            PyExample::RaiseBeforeBcast => "raise_before_bcast",
            PyExample::P2pCycle => "p2p_cycle",
            PyExample::HealthyLoop => "healthy_loop",
        }
    }

    /// The rank count the harness uses unless told otherwise: 3 for each.
    pub const fn default_nprocs(self) -> usize {
        3
    }

    /// The fewest ranks the script accepts (it calls `MPI_Abort` with fewer): 3 for
    /// `raise_before_bcast` (a root 1 and two waiting ranks), 2 for the others.
    pub const fn min_nprocs(self) -> usize {
        match self {
            PyExample::RaiseBeforeBcast => 3,
            PyExample::P2pCycle | PyExample::HealthyLoop => 2,
        }
    }

    /// Whether the program exits by itself: none does (`healthy_loop` keeps going until
    /// killed, the others hang).
    pub const fn runs_to_completion(self) -> bool {
        false
    }

    /// Whether the program can run with `mpi` (see [`PyExample::unsupported_reason`]).
    pub fn supported_by(self, mpi: Mpi) -> bool {
        self.unsupported_reason(mpi).is_none()
    }

    /// Why the program cannot run with `mpi`, or `None` if it can: every Python example runs
    /// on the MPIs of [`Mpi::with_python`], none on Debian's (no mpi4py for them in the test
    /// bed). Tests that skip a pair must print this reason.
    pub fn unsupported_reason(self, mpi: Mpi) -> Option<&'static str> {
        match mpi {
            Mpi::DebianOpenMpi | Mpi::DebianMpich => Some(
                "the test bed installs no mpi4py for Debian's MPIs (only for its four \
                 source-built MPIs and the two PyPI wheels)",
            ),
            _ => None,
        }
    }

    /// The script, `<workspace>/examples/python/<name>.py`.
    pub fn script(self) -> PathBuf {
        python_examples_dir().join(format!("{}.py", self.name()))
    }

    /// The 1-based number of the script's line marked with the comment `# mpiq: <mark>`
    /// (`line_of("bcast")`: `raise_before_bcast`'s `comm.bcast`; `line_of("recv")`:
    /// `p2p_cycle`'s `comm.recv`), for tests that check where a rank waits.
    ///
    /// # Panics
    /// If the script cannot be read, or the mark is on no line or on more than one.
    pub fn line_of(self, mark: &str) -> usize {
        let marker = format!("# mpiq: {mark}");
        let script = self.script();
        let text = std::fs::read_to_string(&script).unwrap_or_else(|e| panic!("reading {}: {e}", script.display()));
        let lines: Vec<usize> = text
            .lines()
            .enumerate()
            .filter(|(_, l)| l.contains(&marker))
            .map(|(i, _)| i + 1)
            .collect();
        match lines[..] {
            [line] => line,
            _ => panic!("{marker:?} is on lines {lines:?} of {}, not on one", script.display()),
        }
    }
}

impl fmt::Display for PyExample {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.py", self.name())
    }
}

/// The directory of the Python examples and their shared module `mpiq_example.py`
/// (`<workspace>/examples/python`).
pub fn python_examples_dir() -> PathBuf {
    examples_source_dir().join("python")
}

/// The function names of `pid`'s main thread, innermost first, from `gdb -batch -p PID -ex
/// bt` (the process goes on once gdb detaches). Frames gdb cannot name are left out.
///
/// # Panics
/// If gdb cannot attach (see [`gdb::batch`]).
pub fn main_thread_functions(pid: u32) -> Vec<String> {
    let out = gdb::batch(pid, &["bt"]);
    parse_backtrace(&out.stdout)
}

/// Waits up to `timeout` until one of `names` is a function of `pid`'s main thread (see
/// [`main_thread_functions`]), looking every 200 ms, and returns that backtrace's functions.
///
/// # Panics
/// After `timeout`, with the last backtrace.
pub fn wait_in(pid: u32, names: &[&str], timeout: Duration) -> Vec<String> {
    let deadline = Instant::now() + timeout;
    loop {
        let frames = main_thread_functions(pid);
        if frames.iter().any(|f| names.contains(&f.as_str())) {
            return frames;
        }
        if Instant::now() >= deadline {
            panic!("pid {pid} is not in any of {names:?} after {timeout:?}; its main thread: {frames:?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The function of each `#N  [0xADDR in] FUNCTION (...)` line of gdb's `bt`.
fn parse_backtrace(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix('#')?;
            let rest = rest.trim_start_matches(|c: char| c.is_ascii_digit()).trim_start();
            let rest = match rest.strip_prefix("0x") {
                Some(after) => after.split_once(" in ")?.1,
                None => rest,
            };
            let name = rest.split([' ', '(']).next()?;
            (!name.is_empty() && name != "??").then(|| name.to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_gdb_backtraces() {
        let bt = "#0  0x00007f0b1c2d3e4f in __GI___poll (fds=0x1, nfds=2, timeout=-1) at poll.c:29\n\
                  #1  0x00007f0b in MPID_Finalize () from /x/libmpi.so.12\n\
                  #2  PMPI_Finalize () at finalize.c:155\n\
                  #3  0x0000 in ?? ()\n\
                  #10 0x00007f in _PyEval_EvalFrameDefault (tstate=0x1) at ceval.c:5\n\
                  (More stack frames follow...)\n";
        assert_eq!(
            parse_backtrace(bt),
            [
                "__GI___poll",
                "MPID_Finalize",
                "PMPI_Finalize",
                "_PyEval_EvalFrameDefault"
            ]
        );
    }

    #[test]
    fn finds_marked_lines() {
        for (example, mark, call) in [
            (PyExample::RaiseBeforeBcast, "bcast", "comm.bcast("),
            (PyExample::P2pCycle, "recv", "comm.recv("),
        ] {
            let line = example.line_of(mark);
            let text = std::fs::read_to_string(example.script()).unwrap();
            assert!(text.lines().nth(line - 1).unwrap().contains(call), "{example}:{line}");
        }
    }
}
