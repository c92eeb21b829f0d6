//! `mpiq pmix-proctable`: the helper process that loads the launcher's
//! `libpmix`, connects to its server as a PMIx tool, reads the proc tables
//! and prints them as one line of JSON ([`super::HelperOutput`]), then
//! finalizes and leaves with `_exit` (the library's threads and exit
//! handlers are not waited for). Every raw pointer of PMIx lives here.

use std::ffi::{c_char, CStr, CString};
use std::io::Write;
use std::path::Path;
use std::time::Instant;

use super::abi::*;
use super::{HelperFailure, HelperOutput, HelperReply, HelperRequest, PmixJob, PmixProcEntry};

/// Most entries taken from one array of the server's answer.
const MAX_ENTRIES: usize = 1 << 20;

type ToolInitFn = unsafe extern "C" fn(*mut PmixProc, *mut PmixInfo, usize) -> PmixStatus;
type ToolFinalizeFn = unsafe extern "C" fn() -> PmixStatus;
type QueryInfoFn = unsafe extern "C" fn(*mut PmixQuery, usize, *mut *mut PmixInfo, *mut usize) -> PmixStatus;
type ErrorStringFn = unsafe extern "C" fn(PmixStatus) -> *const c_char;
type VersionFn = unsafe extern "C" fn() -> *const c_char;
type StateStringFn = unsafe extern "C" fn(PmixProcState) -> *const c_char;

/// The library's entry points (the library itself is never unloaded: the
/// helper ends with `_exit`).
struct Pmix {
    tool_init: ToolInitFn,
    tool_finalize: ToolFinalizeFn,
    query_info: QueryInfoFn,
    error_string: Option<ErrorStringFn>,
    state_string: Option<StateStringFn>,
    version: String,
}

/// A C string the library returned, as text (empty for NULL).
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that outlives the call.
unsafe fn text(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: non-NULL and NUL-terminated, as the caller promises.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// A fixed-size `char` array of the ABI up to its first NUL.
fn fixed_text(a: &[c_char]) -> String {
    let bytes: Vec<u8> = a.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

impl Pmix {
    fn load(path: &Path) -> Result<Pmix, HelperFailure> {
        use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
        // SAFETY: loading runs the library's initialisers; this is the very
        // libpmix the launcher runs with (mpiq found it in its maps), loaded
        // in a process of its own whose only work is this query.
        let lib = unsafe { Library::open(Some(path), RTLD_NOW | RTLD_LOCAL) }
            .map_err(|e| HelperFailure::Load(e.to_string()))?;
        // SAFETY: each symbol is looked up with the type of its declaration
        // in pmix.h / pmix_tool.h (PMIx_Get_version: `const char *(void)`).
        let version_fn = unsafe { lib.get::<VersionFn>(b"PMIx_Get_version\0") }.ok().map(|s| *s);
        // SAFETY: PMIx_Get_version returns a static string.
        let version = version_fn.map(|f| unsafe { text(f()) }).unwrap_or_default();
        let missing = |symbol: &str| HelperFailure::Missing {
            symbol: symbol.to_string(),
            version: version.clone(),
        };
        // SAFETY: as above: the types of pmix_tool.h's PMIx_tool_init and
        // PMIx_tool_finalize, pmix.h's PMIx_Query_info, PMIx_Error_string
        // and PMIx_Proc_state_string.
        let pmix = unsafe {
            Pmix {
                tool_init: *lib
                    .get::<ToolInitFn>(b"PMIx_tool_init\0")
                    .map_err(|_| missing("PMIx_tool_init"))?,
                tool_finalize: *lib
                    .get::<ToolFinalizeFn>(b"PMIx_tool_finalize\0")
                    .map_err(|_| missing("PMIx_tool_finalize"))?,
                query_info: *lib
                    .get::<QueryInfoFn>(b"PMIx_Query_info\0")
                    .map_err(|_| missing("PMIx_Query_info"))?,
                error_string: lib.get::<ErrorStringFn>(b"PMIx_Error_string\0").ok().map(|s| *s),
                state_string: lib.get::<StateStringFn>(b"PMIx_Proc_state_string\0").ok().map(|s| *s),
                version,
            }
        };
        // The functions stay valid for the life of the process.
        std::mem::forget(lib);
        Ok(pmix)
    }

    fn error_name(&self, status: PmixStatus) -> String {
        match self.error_string {
            // SAFETY: PMIx_Error_string returns a static string for any status.
            Some(f) => unsafe { text(f(status)) },
            None => String::new(),
        }
    }

    fn failed(&self, call: &str, status: PmixStatus) -> HelperFailure {
        HelperFailure::Status {
            call: call.to_string(),
            status,
            name: self.error_name(status),
        }
    }
}

/// A NUL-terminated key array (truncated to `PMIX_MAX_KEYLEN`).
fn key(k: &str) -> [c_char; PMIX_MAX_KEYLEN + 1] {
    let mut out = [0 as c_char; PMIX_MAX_KEYLEN + 1];
    for (o, b) in out.iter_mut().zip(k.bytes().take(PMIX_MAX_KEYLEN)) {
        *o = b as c_char;
    }
    out
}

/// A `pmix_info_t` as `PMIX_INFO_LOAD` makes it.
fn info(k: &str, type_: PmixDataType, data: PmixValueData) -> PmixInfo {
    PmixInfo {
        key: key(k),
        flags: 0,
        value: PmixValue { type_, data },
    }
}

fn info_string(k: &str, v: &CString) -> PmixInfo {
    info(
        k,
        PMIX_STRING,
        PmixValueData {
            string: v.as_ptr().cast_mut(),
        },
    )
}

fn info_pid(k: &str, pid: libc::pid_t) -> PmixInfo {
    let mut data = PmixValueData { _size: [0; 3] };
    data.pid = pid;
    info(k, PMIX_PID, data)
}

fn cstring(s: &str) -> Result<CString, HelperFailure> {
    CString::new(s).map_err(|_| HelperFailure::Malformed(format!("a NUL byte in {s:?}")))
}

fn path_cstring(p: &Path) -> Result<CString, HelperFailure> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(p.as_os_str().as_bytes()).map_err(|_| HelperFailure::Malformed(format!("a NUL byte in {p:?}")))
}

impl Pmix {
    /// One query (one key, optional qualifiers), its results as owned data
    /// through `read`.
    fn query<T>(
        &self,
        k: &str,
        qualifiers: &mut [PmixInfo],
        read: impl FnOnce(&[PmixInfo]) -> Result<T, HelperFailure>,
    ) -> Result<T, HelperFailure> {
        let key = cstring(k)?;
        let mut keys = [key.as_ptr().cast_mut(), std::ptr::null_mut()];
        let mut q = PmixQuery {
            keys: keys.as_mut_ptr(),
            qualifiers: if qualifiers.is_empty() {
                std::ptr::null_mut()
            } else {
                qualifiers.as_mut_ptr()
            },
            nqual: qualifiers.len(),
        };
        let mut results: *mut PmixInfo = std::ptr::null_mut();
        let mut n: usize = 0;
        // SAFETY: `q` is a valid pmix_query_t whose keys (NULL-terminated)
        // and qualifiers (nqual of them) outlive the call, which only reads
        // them; `results` and `n` are out-parameters the library fills.
        let rc = unsafe { (self.query_info)(&mut q, 1, &mut results, &mut n) };
        if rc != PMIX_SUCCESS && rc != PMIX_ERR_PARTIAL_SUCCESS {
            return Err(self.failed(&format!("PMIx_Query_info({k})"), rc));
        }
        if results.is_null() || n == 0 {
            return read(&[]);
        }
        if n > MAX_ENTRIES {
            return Err(HelperFailure::Malformed(format!("{n} results for {k}")));
        }
        // SAFETY: the library returned an array of `n` pmix_info_t, which it
        // does not touch again (the helper never frees it: it ends soon).
        read(unsafe { std::slice::from_raw_parts(results, n) })
    }
}

/// The string value of the result with key `k`.
fn string_result(results: &[PmixInfo], k: &str) -> Result<String, HelperFailure> {
    let r = results
        .iter()
        .find(|r| fixed_text(&r.key) == k)
        .ok_or_else(|| HelperFailure::Malformed(format!("no {k} in the answer")))?;
    if r.value.type_ != PMIX_STRING {
        return Err(HelperFailure::Malformed(format!("{k} has type {}", r.value.type_)));
    }
    // SAFETY: the value's type is PMIX_STRING, so `string` is the member in
    // use: NULL or a NUL-terminated string the library owns.
    Ok(unsafe { text(r.value.data.string) })
}

impl Pmix {
    /// The processes in a `pmix_data_array_t` of `pmix_proc_info_t` (or of
    /// `pmix_info_t` holding such arrays, one level down).
    fn procs_in(
        &self,
        array: *const PmixDataArray,
        depth: u32,
        out: &mut Vec<PmixProcEntry>,
    ) -> Result<(), HelperFailure> {
        if array.is_null() || depth > 2 {
            return Ok(());
        }
        // SAFETY: a non-NULL `darray` member of a PMIX_DATA_ARRAY value
        // points to a pmix_data_array_t the library owns.
        let a = unsafe { &*array };
        if a.array.is_null() || a.size == 0 {
            return Ok(());
        }
        if a.size > MAX_ENTRIES {
            return Err(HelperFailure::Malformed(format!("an array of {} entries", a.size)));
        }
        match a.type_ {
            PMIX_PROC_INFO => {
                // SAFETY: an array of type PMIX_PROC_INFO holds `size`
                // pmix_proc_info_t.
                let infos = unsafe { std::slice::from_raw_parts(a.array as *const PmixProcInfo, a.size) };
                for p in infos {
                    out.push(PmixProcEntry {
                        rank: p.proc_.rank,
                        // SAFETY: hostname and executable_name are NULL or
                        // NUL-terminated strings the library owns.
                        host: unsafe { text(p.hostname) },
                        // SAFETY: as above.
                        executable: unsafe { text(p.executable_name) },
                        pid: p.pid,
                        state: p.state,
                        state_name: match self.state_string {
                            // SAFETY: returns a static string for any state.
                            Some(f) => unsafe { text(f(p.state)) },
                            None => String::new(),
                        },
                    });
                }
            }
            PMIX_INFO => {
                // SAFETY: an array of type PMIX_INFO holds `size` pmix_info_t.
                let infos = unsafe { std::slice::from_raw_parts(a.array as *const PmixInfo, a.size) };
                for i in infos.iter().filter(|i| i.value.type_ == PMIX_DATA_ARRAY) {
                    // SAFETY: the value's type says `darray` is in use.
                    self.procs_in(unsafe { i.value.data.darray }, depth + 1, out)?;
                }
            }
            t => return Err(HelperFailure::Malformed(format!("a proc table of type {t}"))),
        }
        Ok(())
    }

    /// The proc table of namespace `ns`.
    fn proc_table(&self, ns: &str) -> Result<Vec<PmixProcEntry>, HelperFailure> {
        let ns_c = cstring(ns)?;
        let mut qualifiers = [info_string(PMIX_NSPACE, &ns_c)];
        self.query(PMIX_QUERY_PROC_TABLE, &mut qualifiers, |results| {
            let mut procs = Vec::new();
            for r in results.iter().filter(|r| fixed_text(&r.key) == PMIX_QUERY_PROC_TABLE) {
                match r.value.type_ {
                    // SAFETY: the value's type says `darray` is in use.
                    PMIX_DATA_ARRAY => self.procs_in(unsafe { r.value.data.darray }, 0, &mut procs)?,
                    t => {
                        return Err(HelperFailure::Malformed(format!(
                            "{PMIX_QUERY_PROC_TABLE} has type {t}"
                        )))
                    }
                }
            }
            Ok(procs)
        })
    }
}

/// Connects, queries, prints the answer, finalizes.
fn session(req: &HelperRequest, emit: &dyn Fn(&HelperOutput)) -> Result<(), HelperFailure> {
    let pmix = Pmix::load(&req.library)?;
    let tmpdir = path_cstring(&req.tmpdir)?;
    let rendezvous = path_cstring(&req.rendezvous)?;
    let mut infos = [
        info_pid(PMIX_SERVER_PIDINFO, req.pid),
        info_string(PMIX_TOOL_ATTACHMENT_FILE, &rendezvous),
        info_string(PMIX_SERVER_TMPDIR, &tmpdir),
        info_string(PMIX_SYSTEM_TMPDIR, &tmpdir),
    ];
    let mut me = PmixProc {
        nspace: [0; PMIX_MAX_NSLEN + 1],
        rank: 0,
    };
    let start = Instant::now();
    // SAFETY: `me` is a pmix_proc_t the library fills; `infos` is an array
    // of 4 initialised pmix_info_t whose strings outlive the call (PMIx
    // copies what it keeps).
    let rc = unsafe { (pmix.tool_init)(&mut me, infos.as_mut_ptr(), infos.len()) };
    if rc != PMIX_SUCCESS {
        return Err(pmix.failed("PMIx_tool_init", rc));
    }
    let init_ms = start.elapsed().as_secs_f64() * 1e3;
    let tool_namespace = fixed_text(&me.nspace);
    let answer = (|| {
        let start = Instant::now();
        let list = pmix.query(PMIX_QUERY_NAMESPACES, &mut [], |r| {
            string_result(r, PMIX_QUERY_NAMESPACES)
        })?;
        // By job number: the launcher's job comes first (later ones are
        // jobs it spawned, or tools, whose namespaces PRRTE keeps listing
        // after they finalized: each would cost a query).
        let mut names: Vec<&str> = list
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty() && *n != tool_namespace)
            .collect();
        names.sort_by_key(|n| (super::job_number(n).unwrap_or(u64::MAX), n.to_string()));
        let (mut jobs, mut first_error, mut left) = (Vec::new(), None, names.len());
        for ns in &names {
            left -= 1;
            match pmix.proc_table(ns) {
                Ok(procs) => {
                    let found = super::is_job_of(&procs, req.pid);
                    jobs.push(PmixJob {
                        namespace: ns.to_string(),
                        procs,
                    });
                    if found {
                        break;
                    }
                }
                // A namespace without processes (PMIX_ERR_NOT_FOUND) is not it.
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        if !jobs.iter().any(|j| super::is_job_of(&j.procs, req.pid)) {
            if let Some(e) = first_error {
                return Err(e);
            }
        }
        let skipped = names[names.len() - left..].iter().map(|n| n.to_string()).collect();
        Ok(HelperReply {
            version: pmix.version.clone(),
            tool_namespace: tool_namespace.clone(),
            jobs,
            skipped,
            init_ms,
            query_ms: start.elapsed().as_secs_f64() * 1e3,
        })
    })();
    emit(&match answer {
        Ok(r) => HelperOutput::Reply(r),
        Err(f) => HelperOutput::Failed(f),
    });
    // SAFETY: the tool was initialised above; nothing of the library is
    // used after this.
    unsafe { (pmix.tool_finalize)() };
    Ok(())
}

/// The helper's `main`: answers `req` with one line of JSON on stdout, and
/// never returns (exit status 0, whatever happened: the answer says it).
pub fn helper_main(req: &HelperRequest) -> ! {
    let emitted = std::cell::Cell::new(false);
    let emit = |o: &HelperOutput| {
        if let Ok(line) = serde_json::to_string(o) {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{line}").and_then(|()| out.flush());
        }
        emitted.set(true);
    };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| session(req, &emit)));
    let failure = match result {
        Ok(Ok(())) => None,
        Ok(Err(f)) => Some(f),
        Err(p) => Some(HelperFailure::Panic(
            p.downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into()),
        )),
    };
    if let Some(f) = failure {
        if !emitted.get() {
            emit(&HelperOutput::Failed(f));
        }
    }
    let _ = std::io::stderr().flush();
    // SAFETY: _exit(2) ends the process at once; stdout was flushed, and
    // nothing of the PMIx library (threads, exit handlers) is waited for.
    unsafe { libc::_exit(0) }
}
