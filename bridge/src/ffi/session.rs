//! The state behind the opaque `mqs_image *`, `mqs_process *` and
//! `mqs_type *` handles mpiq gives a debug library during one dump.

use std::collections::HashMap;
use std::ffi::{c_int, c_void};

use super::abi::*;
use crate::target::cache::PageCache;
use crate::target::{ByteOrder, Target, TargetError, TypeId};

/// Error codes our callbacks return. They are far above the libraries' own
/// codes (which start at `mqs_first_user_code` = 100 and stay below 200).
pub mod code {
    use std::ffi::c_int;
    /// A symbol, function, type or field does not exist.
    pub const NOT_FOUND: c_int = 0x6d71_0001;
    /// Target memory could not be read.
    pub const UNREADABLE: c_int = 0x6d71_0002;
    /// The user interrupted the dump.
    pub const INTERRUPTED: c_int = 0x6d71_0003;
    /// The host debugger failed.
    pub const HOST: c_int = 0x6d71_0004;
    /// An internal error (a panic) in mpiq.
    pub const INTERNAL: c_int = 0x6d71_0005;
    /// The library passed an invalid argument (negative size, NULL buffer).
    pub const BAD_ARGUMENT: c_int = 0x6d71_0006;
    /// The library made more callbacks than one dump allows.
    pub const LIMIT: c_int = 0x6d71_0007;

    /// Text for one of our codes.
    pub fn text(c: c_int) -> Option<&'static str> {
        Some(match c {
            NOT_FOUND => "mpiq: not found in the target's symbols or debug information",
            UNREADABLE => "mpiq: target memory could not be read",
            INTERRUPTED => "mpiq: interrupted",
            HOST => "mpiq: the debugger failed to answer",
            INTERNAL => "mpiq: internal error",
            BAD_ARGUMENT => "mpiq: invalid argument from the debug library",
            LIMIT => "mpiq: the dump reached a limit (the target's lists may be corrupt)",
            _ => return None,
        })
    }
}

/// Most callbacks that may fail in one dump (`MPIQ_MAX_FAILURES` overrides
/// it): the libraries often ignore a failed read and go on with what the
/// buffer held, so a corrupt list can loop through unreadable memory, one
/// host read per turn, for as long as [`MAX_CALLBACKS`] allows (hours).
/// A failed read costs 30 µs through `mpiq-dllhost` and about 100 µs in
/// gdb or lldb, so the limit stops such a loop within seconds; a sound
/// process makes none.
pub const MAX_FAILURES: u64 = 50_000;

/// Most callbacks one dump may make: a corrupt list can send a library round
/// in circles. Past this every callback fails and the dump says why.
/// `MPIQ_MAX_CALLBACKS` overrides it (read by the dump layer).
pub const MAX_CALLBACKS: u64 = 200_000_000;

/// The callback limits of one session, as values (the dump layer reads
/// their overrides from the environment).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallbackLimits {
    /// Most callbacks ([`MAX_CALLBACKS`] by default).
    pub callbacks: u64,
    /// Most failed callbacks ([`MAX_FAILURES`] by default).
    pub failures: u64,
}

impl Default for CallbackLimits {
    fn default() -> Self {
        CallbackLimits {
            callbacks: MAX_CALLBACKS,
            failures: MAX_FAILURES,
        }
    }
}

/// Points a handle back at its session.
pub(crate) struct Handle {
    pub session: *mut c_void,
}

/// What an `mqs_type *` points at.
pub(crate) struct TypeHandle {
    pub session: *mut c_void,
    pub id: TypeId,
}

/// One process's dump: the target, the cache and what the library stored.
pub struct Session<'t> {
    pub target: &'t mut dyn Target,
    pub cache: PageCache,
    pub byte_order: ByteOrder,
    pub world_rank: Option<i32>,
    pub(super) image_info: *mut mqs_image_info,
    pub(super) process_info: *mut mqs_process_info,
    /// The first callback failure with details, for the user.
    pub error: Option<TargetError>,
    /// Set once a callback saw an interruption: every later callback fails.
    pub interrupted: bool,
    /// Callbacks made so far, against `max_callbacks`.
    pub callbacks: u64,
    /// The callback limit of this dump ([`MAX_CALLBACKS`] unless overridden).
    pub max_callbacks: u64,
    /// Set once the library made more than `max_callbacks` callbacks.
    pub limit_hit: bool,
    /// The failed-callback limit of this dump ([`MAX_FAILURES`] unless overridden).
    pub max_failures: u64,
    /// Set once `max_failures` callbacks failed: every later callback fails.
    pub too_many_failures: bool,
    /// Callbacks that failed because the target could not answer (reads,
    /// lookups; interruptions aside): the library may have skipped what it
    /// could not read without saying so.
    pub failures: u64,
    /// Set if a callback panicked.
    pub internal_error: Option<String>,
    /// Type handles given out; boxed so their addresses stay put.
    #[allow(clippy::vec_box)] // the library keeps pointers to the boxes
    pub(super) types: Vec<Box<TypeHandle>>,
    pub(super) type_index: HashMap<TypeId, usize>,
    /// Calls per callback, for `--stats` and debugging.
    pub fetch_calls: u64,
    /// Type names the library looked up and the target did not have.
    pub missing_types: Vec<String>,
    image: Box<Handle>,
    process: Box<Handle>,
}

impl<'t> Session<'t> {
    /// A boxed session whose handles point at itself.
    pub fn new(target: &'t mut dyn Target, world_rank: Option<i32>, limits: CallbackLimits) -> Box<Self> {
        let byte_order = target.byte_order();
        let mut s = Box::new(Session {
            target,
            cache: PageCache::default(),
            byte_order,
            world_rank,
            image_info: std::ptr::null_mut(),
            process_info: std::ptr::null_mut(),
            error: None,
            interrupted: false,
            internal_error: None,
            failures: 0,
            callbacks: 0,
            max_callbacks: limits.callbacks,
            limit_hit: false,
            max_failures: limits.failures,
            too_many_failures: false,
            types: Vec::new(),
            type_index: HashMap::new(),
            fetch_calls: 0,
            missing_types: Vec::new(),
            image: Box::new(Handle {
                session: std::ptr::null_mut(),
            }),
            process: Box::new(Handle {
                session: std::ptr::null_mut(),
            }),
        });
        let me = &mut *s as *mut Session<'t> as *mut c_void;
        s.image.session = me;
        s.process.session = me;
        s
    }

    /// The `mqs_image *` of this session.
    pub(super) fn image_ptr(&mut self) -> *mut mqs_image {
        &mut *self.image as *mut Handle as *mut mqs_image
    }

    /// The `mqs_process *` of this session.
    pub(super) fn process_ptr(&mut self) -> *mut mqs_process {
        &mut *self.process as *mut Handle as *mut mqs_process
    }

    /// Records a target failure and returns the code to give the library.
    pub fn fail(&mut self, e: TargetError) -> c_int {
        let c = match e {
            TargetError::Interrupted => {
                self.interrupted = true;
                code::INTERRUPTED
            }
            TargetError::Unreadable { .. } => code::UNREADABLE,
            _ => code::HOST,
        };
        if c != code::INTERRUPTED {
            self.failures += 1;
            if self.failures >= self.max_failures {
                self.too_many_failures = true;
            }
        }
        if self.error.is_none() || c == code::INTERRUPTED {
            self.error = Some(e);
        }
        c
    }

    /// The handle for a front-end type id (one per id).
    pub fn type_handle(&mut self, id: TypeId) -> *mut mqs_type {
        let me = self as *mut Session<'t> as *mut c_void;
        let i = *self.type_index.entry(id).or_insert_with(|| {
            self.types.push(Box::new(TypeHandle { session: me, id }));
            self.types.len() - 1
        });
        &mut *self.types[i] as *mut TypeHandle as *mut mqs_type
    }
}
