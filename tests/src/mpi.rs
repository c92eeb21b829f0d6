use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Environment variable naming the test-bed root (default `$HOME/.cache/mpiq/testbed`).
pub const TESTBED_ENV: &str = "MPIQ_TESTBED";

/// One MPI implementation: its compiler wrapper, its starter and its message-queue debug library.
///
/// [`Mpi::all`] lists the four test-bed MPIs that `scripts/testbed` builds from source with
/// debug info: Open MPI 4.1.4 and 5.0.7, MPICH 4.0.2 for ch3 and for ch4:ofi.
/// [`Mpi::packaged`] lists four MPIs as users install them, with no debug info and
/// so no readable message queues: Debian's Open MPI and MPICH (apt) and the PyPI wheels of
/// Open MPI 5.0.10 and MPICH 4.3.2 (each in its own venv under the test bed). `scripts/testbed`
/// installs all six.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mpi {
    /// Open MPI 4.1.4 from the test bed (`<testbed>/openmpi-4.1.4`).
    OpenMpi,
    /// MPICH 4.0.2, `ch3:nemesis`, `--enable-debuginfo` (`<testbed>/mpich-4.0.2`).
    Mpich,
    /// Open MPI 5.0.7 from Debian trixie's source package, with its bundled PMIx and PRRTE
    /// (`<testbed>/openmpi-5.0.7`): `mpirun` is PRRTE's `prterun`, with no `MPIR_proctable`.
    /// Built with UCX too; the harness runs it on the `ob1` PML, the one whose requests its
    /// debug library sees.
    OpenMpi5,
    /// MPICH 4.0.2 for `ch4:ofi` (libfabric from Debian), `--enable-debuginfo`
    /// (`<testbed>/mpich-4.0.2-ch4`): the device users get from Debian and PyPI. Its debug
    /// library reads receives wrongly: mpiq marks them untrustworthy (docs/mpi-support.md).
    MpichCh4,
    /// Debian's own Open MPI (`/usr/bin/mpicc.openmpi`, `/usr/bin/mpirun.openmpi`): stripped,
    /// for tests of what mpiq says when an MPI has no debug info. Not in [`Mpi::all`].
    DebianOpenMpi,
    /// Debian's own MPICH (packages `mpich`, `libmpich-dev`; 4.0.2, `ch4:ucx` on Debian 12):
    /// `/usr/bin/mpicc.mpich`, `/usr/bin/mpiexec.mpich`, `libmpich.so.12`. Stripped, and
    /// without MPICH's debug library (`libtvmpich.so`). In [`Mpi::packaged`].
    DebianMpich,
    /// The PyPI wheel `openmpi==5.0.10` in the venv `<testbed>/pypi-openmpi-5.0.10`: Open MPI
    /// 5 (PRRTE's `prterun` behind `bin/mpirun`), no debug info, no `libompi_dbg_msgq.so`.
    /// In [`Mpi::packaged`].
    PypiOpenMpi,
    /// The PyPI wheel `mpich==4.3.2` in the venv `<testbed>/pypi-mpich-4.3.2`: MPICH 4.3.2
    /// (`ch4:ucx,ofi`, hydra), no debug info, no `libtvmpich.so`. In [`Mpi::packaged`].
    PypiMpich,
}

impl Mpi {
    /// The test-bed MPIs built with debug info that every per-example, job and replay test
    /// runs against.
    pub const fn all() -> [Mpi; 4] {
        [Mpi::OpenMpi, Mpi::Mpich, Mpi::OpenMpi5, Mpi::MpichCh4]
    }

    /// The four packaged MPIs (no debug info, no readable message queues): Debian's Open MPI
    /// and MPICH, and the PyPI wheels of Open MPI 5.0.10 and MPICH 4.3.2.
    pub const fn packaged() -> [Mpi; 4] {
        [Mpi::DebianOpenMpi, Mpi::DebianMpich, Mpi::PypiOpenMpi, Mpi::PypiMpich]
    }

    /// Whether this is one of [`Mpi::packaged`] (installed as users get it, not built by the
    /// test bed with debug info).
    pub const fn is_packaged(self) -> bool {
        !matches!(self, Mpi::OpenMpi | Mpi::Mpich | Mpi::OpenMpi5 | Mpi::MpichCh4)
    }

    /// A short stable name, usable in file names and test messages:
    /// `openmpi-4.1.4`, `mpich-4.0.2`, `openmpi-5.0.7`, `mpich-4.0.2-ch4`, `debian-openmpi`, `debian-mpich`, `pypi-openmpi-5.0.10`,
    /// `pypi-mpich-4.3.2`. For the test-bed MPIs and the wheels it is also the directory under
    /// the test bed.
    pub const fn name(self) -> &'static str {
        match self {
            Mpi::OpenMpi => "openmpi-4.1.4",
            Mpi::Mpich => "mpich-4.0.2",
            Mpi::OpenMpi5 => "openmpi-5.0.7",
            Mpi::MpichCh4 => "mpich-4.0.2-ch4",
            Mpi::DebianOpenMpi => "debian-openmpi",
            Mpi::DebianMpich => "debian-mpich",
            Mpi::PypiOpenMpi => "pypi-openmpi-5.0.10",
            Mpi::PypiMpich => "pypi-mpich-4.3.2",
        }
    }

    /// Whether this is an Open MPI (the test bed's, Debian's or the PyPI wheel); the others are
    /// MPICH.
    pub const fn is_open_mpi(self) -> bool {
        matches!(
            self,
            Mpi::OpenMpi | Mpi::OpenMpi5 | Mpi::DebianOpenMpi | Mpi::PypiOpenMpi
        )
    }

    /// Whether this is an Open MPI 5 (PRRTE's `prterun` as `mpirun`, no `MPIR_proctable`).
    pub const fn is_open_mpi5(self) -> bool {
        matches!(self, Mpi::OpenMpi5 | Mpi::PypiOpenMpi)
    }

    /// Whether this is an MPICH built for its ch4 device (the test bed's ch4:ofi build,
    /// Debian's and PyPI's).
    pub const fn is_ch4(self) -> bool {
        matches!(self, Mpi::MpichCh4 | Mpi::DebianMpich | Mpi::PypiMpich)
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
            Mpi::OpenMpi | Mpi::Mpich | Mpi::OpenMpi5 | Mpi::MpichCh4 | Mpi::PypiOpenMpi | Mpi::PypiMpich => {
                Self::testbed_root().join(self.name())
            }
            Mpi::DebianOpenMpi | Mpi::DebianMpich => PathBuf::from("/usr"),
        }
    }

    /// The directory holding the MPI's `libmpi` (what the executables' RUNPATH names, for the
    /// test bed and the wheels): `<prefix>/lib`, or Debian's `/usr/lib/<multiarch>`.
    pub fn library_dir(self) -> PathBuf {
        match self {
            Mpi::DebianOpenMpi | Mpi::DebianMpich => debian_libdir(),
            _ => self.prefix_unchecked().join("lib"),
        }
    }

    /// The MPI library the examples link with (whether or not it exists): `libmpi.so.40`
    /// (Open MPI), `libmpi.so.12` (MPICH), Debian's `libmpich.so.12`.
    pub fn libmpi(self) -> PathBuf {
        let name = match self {
            Mpi::OpenMpi | Mpi::OpenMpi5 | Mpi::DebianOpenMpi | Mpi::PypiOpenMpi => "libmpi.so.40",
            Mpi::Mpich | Mpi::MpichCh4 | Mpi::PypiMpich => "libmpi.so.12",
            Mpi::DebianMpich => "libmpich.so.12",
        };
        self.library_dir().join(name)
    }

    /// Whether this MPI is installed (its compiler wrapper and starter exist; for a PyPI wheel
    /// also the stamp `scripts/testbed` writes once the venv is complete).
    pub fn is_installed(self) -> bool {
        let complete = match self {
            Mpi::PypiOpenMpi | Mpi::PypiMpich => self.prefix_unchecked().join(".mpiq-stamp").is_file(),
            _ => true,
        };
        complete && self.mpicc_unchecked().is_file() && self.starter_unchecked().is_file()
    }

    /// The version of mpi4py `scripts/testbed` installs for each MPI that has one.
    pub const MPI4PY_VERSION: &'static str = "4.1.1";

    /// The venv whose Python runs mpi4py programs under this MPI, whether or not it exists:
    /// for the test-bed MPIs `<testbed>/mpi4py-4.1.1-<name>` (mpi4py built from source with
    /// the MPI's `mpicc`), for the PyPI wheels their own venv (mpi4py's binary wheel, which
    /// loads the venv's `lib/libmpi.so.*`). `None` for Debian's MPIs: the test bed gives
    /// them no mpi4py.
    pub fn python_venv_unchecked(self) -> Option<PathBuf> {
        match self {
            Mpi::OpenMpi | Mpi::Mpich | Mpi::OpenMpi5 | Mpi::MpichCh4 => {
                Some(Self::testbed_root().join(format!("mpi4py-{}-{}", Self::MPI4PY_VERSION, self.name())))
            }
            Mpi::PypiOpenMpi | Mpi::PypiMpich => Some(self.prefix_unchecked()),
            Mpi::DebianOpenMpi | Mpi::DebianMpich => None,
        }
    }

    /// The stamp `scripts/testbed` writes into [`Mpi::python_venv_unchecked`] once its
    /// mpi4py is installed and checked: `.mpiq-stamp` of an mpi4py venv, `.mpiq-mpi4py-stamp`
    /// in a PyPI venv (whose `.mpiq-stamp` is the MPI wheel's).
    fn mpi4py_stamp(self) -> Option<PathBuf> {
        let venv = self.python_venv_unchecked()?;
        Some(match self {
            Mpi::PypiOpenMpi | Mpi::PypiMpich => venv.join(".mpiq-mpi4py-stamp"),
            _ => venv.join(".mpiq-stamp"),
        })
    }

    /// Whether this MPI has mpi4py in the test bed (its venv's `bin/python` and stamp exist);
    /// `false` for Debian's MPIs.
    pub fn has_python(self) -> bool {
        match (self.python_venv_unchecked(), self.mpi4py_stamp()) {
            (Some(venv), Some(stamp)) => venv.join("bin/python").is_file() && stamp.is_file(),
            _ => false,
        }
    }

    /// The Python interpreter that runs mpi4py programs under this MPI: `bin/python` of
    /// [`Mpi::python_venv_unchecked`], or `None` for the MPIs the test bed gives no mpi4py
    /// (Debian's).
    ///
    /// # Panics
    /// If this MPI should have one but the venv is missing or unfinished, with a message
    /// saying to run `scripts/testbed`.
    pub fn python(self) -> Option<PathBuf> {
        let venv = self.python_venv_unchecked()?;
        if !self.has_python() {
            panic!(
                "mpi4py {} for {self} is not installed: no {} or no stamp {} of a complete \
                 install. Run `scripts/testbed` (it builds mpi4py from source against each \
                 test-bed MPI, a few minutes each, and installs its wheel into the PyPI venvs) \
                 or point {TESTBED_ENV} at an existing test bed",
                Self::MPI4PY_VERSION,
                venv.join("bin/python").display(),
                self.mpi4py_stamp().expect("a venv has a stamp").display(),
            );
        }
        Some(venv.join("bin/python"))
    }

    /// The MPIs that run Python (mpi4py) programs: the test bed's four and the two PyPI
    /// wheels (not Debian's, which the test bed gives no mpi4py).
    pub const fn with_python() -> [Mpi; 6] {
        [
            Mpi::OpenMpi,
            Mpi::Mpich,
            Mpi::OpenMpi5,
            Mpi::MpichCh4,
            Mpi::PypiOpenMpi,
            Mpi::PypiMpich,
        ]
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

    /// The job starter: Open MPI's `bin/mpirun` (`mpirun.openmpi` for Debian's; Open MPI 5's
    /// execs `prterun`), MPICH's `bin/mpiexec` (hydra; `mpiexec.mpich` for Debian's).
    ///
    /// # Panics
    /// If the MPI is not installed.
    pub fn starter(self) -> PathBuf {
        self.require_installed();
        self.starter_unchecked()
    }

    /// Where the MPI's message-queue debug library is installed, for the MPIs that install
    /// one; this is the path that `MPIR_dll_name` in a running job holds. Open MPI 4.1.4:
    /// `lib/openmpi/libompi_dbg_msgq.so`; MPICH 4.0.2: `lib/libtvmpich.so`; Debian's Open MPI:
    /// `/usr/lib/<multiarch>/openmpi/lib/openmpi3/libompi_dbg_msgq.so`.
    ///
    /// `None` for the MPIs that ship none: Debian's MPICH (no `libtvmpich.so`) and both PyPI
    /// wheels (the Open MPI 5 wheel still exports `MPIR_dll_name`, naming a library it does
    /// not contain; the MPICH wheel exports no `MPIR_dll_name` at all).
    pub fn debug_library(self) -> Option<PathBuf> {
        match self {
            Mpi::OpenMpi | Mpi::OpenMpi5 => Some(self.prefix_unchecked().join("lib/openmpi/libompi_dbg_msgq.so")),
            Mpi::Mpich | Mpi::MpichCh4 => Some(self.prefix_unchecked().join("lib/libtvmpich.so")),
            Mpi::DebianOpenMpi => Some(debian_libdir().join("openmpi/lib/openmpi3/libompi_dbg_msgq.so")),
            Mpi::DebianMpich | Mpi::PypiOpenMpi | Mpi::PypiMpich => None,
        }
    }

    /// The options the harness always passes to the starter before `-n N`:
    ///
    /// - Open MPI 4.1 (test bed, Debian): `--allow-run-as-root --oversubscribe --mca btl
    ///   self,vader` (CI runs as root; more ranks than cores; shared memory only).
    /// - Open MPI 5 (test bed 5.0.7, PyPI 5.0.10): `--allow-run-as-root --oversubscribe --mca pml ob1 --mca btl
    ///   self,sm`. prterun refuses root without the first. `sm` is 5.x's name for `vader`.
    ///   Choosing `ob1` keeps the wheel's UCX and libfabric from probing for networks: with
    ///   them a 3-rank job took 1.7-1.9 s to become ready on 2 cores, with `ob1` 0.2-0.4 s.
    /// - MPICH (hydra): none. Both packaged MPICHs are ch4 with UCX (the wheel also libfabric),
    ///   and start in about 0.3-0.6 s as they are.
    pub const fn starter_options(self) -> &'static [&'static str] {
        match self {
            Mpi::OpenMpi | Mpi::DebianOpenMpi => {
                &["--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,vader"]
            }
            Mpi::OpenMpi5 | Mpi::PypiOpenMpi => &[
                "--allow-run-as-root",
                "--oversubscribe",
                "--mca",
                "pml",
                "ob1",
                "--mca",
                "btl",
                "self,sm",
            ],
            Mpi::Mpich | Mpi::MpichCh4 | Mpi::DebianMpich | Mpi::PypiMpich => &[],
        }
    }

    /// The command that starts `exe args...` on `nprocs` ranks on this machine, with the
    /// options the harness always uses: `<starter> <starter_options> -n N exe args` (see
    /// [`Mpi::starter_options`]), e.g. Open MPI 4.1:
    /// `mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -n N exe args`;
    /// MPICH: `mpiexec -n N exe args`. Only the arguments are set: the environment,
    /// standard streams and process group are the caller's business (see [`crate::Job`]),
    /// and so is a [`crate::JobDir`] for the files the job leaves.
    ///
    /// # Panics
    /// If the MPI is not installed.
    pub fn starter_command<S: AsRef<std::ffi::OsStr>>(self, nprocs: usize, exe: &Path, args: &[S]) -> Command {
        self.starter_command_mca(nprocs, exe, args, &[])
    }

    /// [`Mpi::starter_command`] with Open MPI `--mca KEY VALUE` settings: each replaces the
    /// harness's own setting of its KEY, or is added.
    ///
    /// # Panics
    /// If the MPI is not installed.
    pub fn starter_command_mca<S: AsRef<std::ffi::OsStr>>(
        self,
        nprocs: usize,
        exe: &Path,
        args: &[S],
        mca: &[(String, String)],
    ) -> Command {
        let mut cmd = Command::new(self.starter());
        let mut options: Vec<String> = self.starter_options().iter().map(|s| s.to_string()).collect();
        for (key, value) in mca {
            match options.windows(3).position(|w| w[0] == "--mca" && w[1] == *key) {
                Some(i) => options[i + 2] = value.clone(),
                None => options.extend(["--mca".to_string(), key.clone(), value.clone()]),
            }
        }
        cmd.args(&options);
        cmd.arg("-n").arg(nprocs.to_string()).arg(exe).args(args);
        cmd
    }

    fn mpicc_unchecked(self) -> PathBuf {
        match self {
            Mpi::OpenMpi | Mpi::Mpich | Mpi::OpenMpi5 | Mpi::MpichCh4 | Mpi::PypiOpenMpi | Mpi::PypiMpich => {
                self.prefix_unchecked().join("bin/mpicc")
            }
            Mpi::DebianOpenMpi => PathBuf::from("/usr/bin/mpicc.openmpi"),
            Mpi::DebianMpich => PathBuf::from("/usr/bin/mpicc.mpich"),
        }
    }

    fn starter_unchecked(self) -> PathBuf {
        match self {
            Mpi::OpenMpi | Mpi::OpenMpi5 | Mpi::PypiOpenMpi => self.prefix_unchecked().join("bin/mpirun"),
            Mpi::Mpich | Mpi::MpichCh4 | Mpi::PypiMpich => self.prefix_unchecked().join("bin/mpiexec"),
            Mpi::DebianOpenMpi => PathBuf::from("/usr/bin/mpirun.openmpi"),
            Mpi::DebianMpich => PathBuf::from("/usr/bin/mpiexec.mpich"),
        }
    }

    fn require_installed(self) {
        if self.is_installed() {
            return;
        }
        match self {
            Mpi::OpenMpi | Mpi::Mpich | Mpi::OpenMpi5 | Mpi::MpichCh4 => panic!(
                "{self} is not installed at {} (no {} or {}): run `scripts/testbed` \
                 (about 30 minutes on 2 cores for all four) or point {TESTBED_ENV} at an existing test bed",
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
            Mpi::DebianMpich => panic!(
                "{self} is not installed (no {} or {}): run `scripts/testbed`, which installs \
                 Debian's `mpich` and `libmpich-dev` and keeps the `mpi` and `mpirun` \
                 alternatives as they were (a plain `apt-get install mpich libmpich-dev` works \
                 too but may change what /usr/bin/mpicc is)",
                self.mpicc_unchecked().display(),
                self.starter_unchecked().display(),
            ),
            Mpi::PypiOpenMpi | Mpi::PypiMpich => panic!(
                "{self} is not installed at {} (no {}, {} or the stamp .mpiq-stamp of a \
                 complete venv): run `scripts/testbed` (under a minute: a venv and \
                 `pip install {}`) or point {TESTBED_ENV} at an existing test bed",
                self.prefix_unchecked().display(),
                self.mpicc_unchecked().display(),
                self.starter_unchecked().display(),
                if self.is_open_mpi5() {
                    "openmpi==5.0.10"
                } else {
                    "mpich==4.3.2"
                },
            ),
        }
    }
}

impl fmt::Display for Mpi {
    /// Human name: `Open MPI 4.1.4`, `MPICH 4.0.2`, `Open MPI 5.0.7`, `MPICH 4.0.2 (ch4:ofi)`,
    /// `Debian's Open MPI`, `Debian's MPICH`,
    /// `Open MPI 5.0.10 (PyPI)`, `MPICH 4.3.2 (PyPI)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mpi::OpenMpi => "Open MPI 4.1.4",
            Mpi::Mpich => "MPICH 4.0.2",
            Mpi::OpenMpi5 => "Open MPI 5.0.7",
            Mpi::MpichCh4 => "MPICH 4.0.2 (ch4:ofi)",
            Mpi::DebianOpenMpi => "Debian's Open MPI",
            Mpi::DebianMpich => "Debian's MPICH",
            Mpi::PypiOpenMpi => "Open MPI 5.0.10 (PyPI)",
            Mpi::PypiMpich => "MPICH 4.3.2 (PyPI)",
        })
    }
}

/// Debian's multiarch library directory (`/usr/lib/<multiarch>`), where its `libmpi.so.40`
/// and `libmpich.so.12` are; Open MPI's own files are under its `openmpi/lib`.
fn debian_libdir() -> PathBuf {
    let multiarch = format!("{}-linux-gnu", std::env::consts::ARCH);
    PathBuf::from("/usr/lib").join(multiarch)
}
