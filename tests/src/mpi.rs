use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Environment variable naming the test-bed root (default `$HOME/.cache/mpiq/testbed`).
pub const TESTBED_ENV: &str = "MPIQ_TESTBED";

/// One MPI implementation: its compiler wrapper, its starter and its message-queue debug library.
///
/// [`Mpi::all`] lists the two test-bed MPIs that `scripts/testbed` builds from source with
/// debug info. [`Mpi::DebianOpenMpi`] is the distribution's stripped Open MPI, kept apart for
/// error-case tests (its `libmpi.so` has no debug info, so MQD cannot work with it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mpi {
    /// Open MPI 4.1.4 from the test bed (`<testbed>/openmpi-4.1.4`).
    OpenMpi,
    /// MPICH 4.0.2, `ch3:nemesis`, `--enable-debuginfo` (`<testbed>/mpich-4.0.2`).
    Mpich,
    /// Debian's own Open MPI (`/usr/bin/mpicc.openmpi`, `/usr/bin/mpirun.openmpi`): stripped,
    /// for tests of what mpiq says when an MPI has no debug info. Not in [`Mpi::all`].
    DebianOpenMpi,
}

impl Mpi {
    /// The two test-bed MPIs, the ones every real-MPI test runs against.
    pub const fn all() -> [Mpi; 2] {
        [Mpi::OpenMpi, Mpi::Mpich]
    }

    /// A short stable name, usable in file names and test messages:
    /// `openmpi-4.1.4`, `mpich-4.0.2`, `debian-openmpi`.
    pub const fn name(self) -> &'static str {
        match self {
            Mpi::OpenMpi => "openmpi-4.1.4",
            Mpi::Mpich => "mpich-4.0.2",
            Mpi::DebianOpenMpi => "debian-openmpi",
        }
    }

    /// Whether this is an Open MPI (the test-bed one or Debian's).
    pub const fn is_open_mpi(self) -> bool {
        matches!(self, Mpi::OpenMpi | Mpi::DebianOpenMpi)
    }

    /// The test-bed root: `$MPIQ_TESTBED`, or `$HOME/.cache/mpiq/testbed`.
    pub fn testbed_root() -> PathBuf {
        match std::env::var_os(TESTBED_ENV) {
            Some(dir) if !dir.is_empty() => PathBuf::from(dir),
            _ => {
                let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
                Path::new(&home).join(".cache/mpiq/testbed")
            }
        }
    }

    /// The install prefix, whether or not it exists.
    pub fn prefix_unchecked(self) -> PathBuf {
        match self {
            Mpi::OpenMpi | Mpi::Mpich => Self::testbed_root().join(self.name()),
            Mpi::DebianOpenMpi => PathBuf::from("/usr"),
        }
    }

    /// Whether this MPI is installed (its compiler wrapper and starter exist).
    pub fn is_installed(self) -> bool {
        self.mpicc_unchecked().is_file() && self.starter_unchecked().is_file()
    }

    /// The install prefix.
    ///
    /// # Panics
    /// If the MPI is not installed, with a message saying how to install it.
    pub fn prefix(self) -> PathBuf {
        self.require_installed();
        self.prefix_unchecked()
    }

    /// The C compiler wrapper (`bin/mpicc`).
    ///
    /// # Panics
    /// If the MPI is not installed.
    pub fn mpicc(self) -> PathBuf {
        self.require_installed();
        self.mpicc_unchecked()
    }

    /// The job starter: Open MPI's `bin/mpirun`, MPICH's `bin/mpiexec` (hydra).
    ///
    /// # Panics
    /// If the MPI is not installed.
    pub fn starter(self) -> PathBuf {
        self.require_installed();
        self.starter_unchecked()
    }

    /// Where the MPI's message-queue debug library is installed; this is the path that
    /// `MPIR_dll_name` in a running job holds. Open MPI: `lib/openmpi/libompi_dbg_msgq.so`;
    /// MPICH: `lib/libtvmpich.so`.
    pub fn debug_library(self) -> PathBuf {
        match self {
            Mpi::OpenMpi => self.prefix_unchecked().join("lib/openmpi/libompi_dbg_msgq.so"),
            Mpi::Mpich => self.prefix_unchecked().join("lib/libtvmpich.so"),
            Mpi::DebianOpenMpi => debian_openmpi_libdir().join("openmpi3/libompi_dbg_msgq.so"),
        }
    }

    /// The command that starts `exe args...` on `nprocs` ranks on this machine, with the
    /// options the harness always uses. Open MPI:
    /// `mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -n N exe args`;
    /// MPICH: `mpiexec -n N exe args`. Only the arguments are set: the environment,
    /// standard streams and process group are the caller's business (see [`crate::Job`]).
    ///
    /// # Panics
    /// If the MPI is not installed.
    pub fn starter_command<S: AsRef<std::ffi::OsStr>>(self, nprocs: usize, exe: &Path, args: &[S]) -> Command {
        let mut cmd = Command::new(self.starter());
        if self.is_open_mpi() {
            cmd.args(["--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,vader"]);
        }
        cmd.arg("-n").arg(nprocs.to_string()).arg(exe).args(args);
        cmd
    }

    fn mpicc_unchecked(self) -> PathBuf {
        match self {
            Mpi::OpenMpi | Mpi::Mpich => self.prefix_unchecked().join("bin/mpicc"),
            Mpi::DebianOpenMpi => PathBuf::from("/usr/bin/mpicc.openmpi"),
        }
    }

    fn starter_unchecked(self) -> PathBuf {
        match self {
            Mpi::OpenMpi => self.prefix_unchecked().join("bin/mpirun"),
            Mpi::Mpich => self.prefix_unchecked().join("bin/mpiexec"),
            Mpi::DebianOpenMpi => PathBuf::from("/usr/bin/mpirun.openmpi"),
        }
    }

    fn require_installed(self) {
        if self.is_installed() {
            return;
        }
        match self {
            Mpi::OpenMpi | Mpi::Mpich => panic!(
                "{self} is not installed at {} (no {} or {}): run `scripts/testbed` \
                 (about 15 minutes on 2 cores) or point {TESTBED_ENV} at an existing test bed",
                self.prefix_unchecked().display(),
                self.mpicc_unchecked().display(),
                self.starter_unchecked().display(),
            ),
            Mpi::DebianOpenMpi => panic!(
                "{self} is not installed (no {} or {}): `apt-get install openmpi-bin \
                 libopenmpi-dev` (scripts/testbed installs them)",
                self.mpicc_unchecked().display(),
                self.starter_unchecked().display(),
            ),
        }
    }
}

impl fmt::Display for Mpi {
    /// Human name: `Open MPI 4.1.4`, `MPICH 4.0.2`, `Debian's Open MPI`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mpi::OpenMpi => "Open MPI 4.1.4",
            Mpi::Mpich => "MPICH 4.0.2",
            Mpi::DebianOpenMpi => "Debian's Open MPI",
        })
    }
}

/// Debian's Open MPI library directory (`/usr/lib/<multiarch>/openmpi/lib`).
fn debian_openmpi_libdir() -> PathBuf {
    let multiarch = format!("{}-linux-gnu", std::env::consts::ARCH);
    PathBuf::from("/usr/lib").join(multiarch).join("openmpi/lib")
}
