//! The part of the PMIx ABI the tool query uses: the structs as
//! `#[repr(C)]`, the attribute keys, data type codes, status codes and
//! process states, from OpenPMIx's `include/pmix_common.h.in` (Open MPI
//! 5.0.7's `3rd-party/openpmix`, the same in Debian's 4.2.2). The layout
//! test (`cli/tests/pmix_abi.rs`) compiles a C program against the installed
//! headers and checks every size, offset and value here against them.

use std::ffi::{c_char, c_int, c_void};

/// `PMIX_MAX_NSLEN`: a namespace is `char[PMIX_MAX_NSLEN + 1]`.
pub const PMIX_MAX_NSLEN: usize = 255;
/// `PMIX_MAX_KEYLEN`: a key is `char[PMIX_MAX_KEYLEN + 1]`.
pub const PMIX_MAX_KEYLEN: usize = 511;

/// `pmix_status_t`
pub type PmixStatus = c_int;
/// `pmix_data_type_t`
pub type PmixDataType = u16;
/// `pmix_rank_t`
pub type PmixRank = u32;
/// `pmix_proc_state_t`
pub type PmixProcState = u8;

/// `pmix_proc_t`
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PmixProc {
    /// `nspace`: NUL-terminated.
    pub nspace: [c_char; PMIX_MAX_NSLEN + 1],
    /// `rank`
    pub rank: PmixRank,
}

/// `pmix_data_array_t`
#[repr(C)]
pub struct PmixDataArray {
    /// `type`: of the elements.
    pub type_: PmixDataType,
    /// `size`: number of elements.
    pub size: usize,
    /// `array`
    pub array: *mut c_void,
}

/// `pmix_proc_info_t`
#[repr(C)]
pub struct PmixProcInfo {
    /// `proc`
    pub proc_: PmixProc,
    /// `hostname`
    pub hostname: *mut c_char,
    /// `executable_name`
    pub executable_name: *mut c_char,
    /// `pid`
    pub pid: libc::pid_t,
    /// `exit_code`
    pub exit_code: c_int,
    /// `state`
    pub state: PmixProcState,
}

/// The members of `pmix_value_t`'s union that are read or written here;
/// `_size` gives the union the size and alignment of its largest member
/// (`pmix_envar_t`: two pointers and a char).
#[repr(C)]
#[derive(Clone, Copy)]
pub union PmixValueData {
    /// `flag` (`PMIX_BOOL`)
    pub flag: bool,
    /// `string` (`PMIX_STRING`)
    pub string: *mut c_char,
    /// `pid` (`PMIX_PID`)
    pub pid: libc::pid_t,
    /// `uint32` (`PMIX_UINT32`)
    pub uint32: u32,
    /// `darray` (`PMIX_DATA_ARRAY`)
    pub darray: *mut PmixDataArray,
    /// `pinfo` (`PMIX_PROC_INFO`)
    pub pinfo: *mut PmixProcInfo,
    /// The size of the whole union.
    pub _size: [u64; 3],
}

/// `pmix_value_t`
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PmixValue {
    /// `type`
    pub type_: PmixDataType,
    /// `data`
    pub data: PmixValueData,
}

/// `pmix_info_t`
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PmixInfo {
    /// `key`: NUL-terminated.
    pub key: [c_char; PMIX_MAX_KEYLEN + 1],
    /// `flags` (`pmix_info_directives_t`)
    pub flags: u32,
    /// `value`
    pub value: PmixValue,
}

/// `pmix_query_t`
#[repr(C)]
pub struct PmixQuery {
    /// `keys`: NULL-terminated array of keys.
    pub keys: *mut *mut c_char,
    /// `qualifiers`
    pub qualifiers: *mut PmixInfo,
    /// `nqual`
    pub nqual: usize,
}

/// `PMIX_BOOL`
pub const PMIX_BOOL: PmixDataType = 1;
/// `PMIX_STRING`
pub const PMIX_STRING: PmixDataType = 3;
/// `PMIX_PID`
pub const PMIX_PID: PmixDataType = 5;
/// `PMIX_UINT32`
pub const PMIX_UINT32: PmixDataType = 14;
/// `PMIX_PROC_INFO`
pub const PMIX_PROC_INFO: PmixDataType = 38;
/// `PMIX_DATA_ARRAY`
pub const PMIX_DATA_ARRAY: PmixDataType = 39;
/// `PMIX_INFO`
pub const PMIX_INFO: PmixDataType = 24;

/// `PMIX_SUCCESS`
pub const PMIX_SUCCESS: PmixStatus = 0;
/// `PMIX_ERR_NO_PERMISSIONS`
pub const PMIX_ERR_NO_PERMISSIONS: PmixStatus = -23;
/// `PMIX_ERR_TIMEOUT`
pub const PMIX_ERR_TIMEOUT: PmixStatus = -24;
/// `PMIX_ERR_UNREACH`
pub const PMIX_ERR_UNREACH: PmixStatus = -25;
/// `PMIX_ERR_NOT_FOUND`
pub const PMIX_ERR_NOT_FOUND: PmixStatus = -46;
/// `PMIX_ERR_NOT_SUPPORTED`
pub const PMIX_ERR_NOT_SUPPORTED: PmixStatus = -47;
/// `PMIX_ERR_PARTIAL_SUCCESS`
pub const PMIX_ERR_PARTIAL_SUCCESS: PmixStatus = -52;

/// `PMIX_PROC_STATE_UNTERMINATED`: a state below it is a process that has
/// not ended.
pub const PMIX_PROC_STATE_UNTERMINATED: PmixProcState = 15;

/// `PMIX_SERVER_PIDINFO` (`pid_t`): pid of the server a tool connects to.
pub const PMIX_SERVER_PIDINFO: &str = "pmix.srvr.pidinfo";
/// `PMIX_SERVER_TMPDIR` (`char*`): where the server puts its client
/// rendezvous points and contact info.
pub const PMIX_SERVER_TMPDIR: &str = "pmix.srvr.tmpdir";
/// `PMIX_SYSTEM_TMPDIR` (`char*`): the system's tmpdir, where a tool
/// searches for the rendezvous files of a server given by pid.
pub const PMIX_SYSTEM_TMPDIR: &str = "pmix.sys.tmpdir";
/// `PMIX_TOOL_ATTACHMENT_FILE` (`char*`): the rendezvous file to connect
/// through.
pub const PMIX_TOOL_ATTACHMENT_FILE: &str = "pmix.tool.attach";
/// `PMIX_QUERY_NAMESPACES` (returns `char*`: a comma-delimited list of the
/// active namespaces).
pub const PMIX_QUERY_NAMESPACES: &str = "pmix.qry.ns";
/// `PMIX_QUERY_PROC_TABLE` (returns a `pmix_data_array_t` of
/// `pmix_proc_info_t`; needs a `PMIX_NSPACE` qualifier).
pub const PMIX_QUERY_PROC_TABLE: &str = "pmix.qry.ptable";
/// `PMIX_NSPACE` (`char*`)
pub const PMIX_NSPACE: &str = "pmix.nspace";
