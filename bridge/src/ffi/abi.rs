//! The mqs ABI, mirrored from the MQD interface header (`mpi_interface.h` /
//! `msgq_interface.h`) with the header's own names. LP64 hosts only: the
//! libraries define `mqs_taddr_t` as `unsigned long` and `mqs_tword_t` as
//! `long`.
#![allow(non_camel_case_types, non_upper_case_globals, missing_docs)]

use std::ffi::{c_char, c_int, c_long, c_ulong, c_void};
use std::mem::{offset_of, size_of};

/// A target address.
pub type mqs_taddr_t = u64;
/// A target word.
pub type mqs_tword_t = i64;

/// `MQS_INTERFACE_COMPATIBILITY` of the interface mpiq implements.
pub const MQS_INTERFACE_COMPATIBILITY: c_int = 2;
/// The compatibility level of libraries built with the MPI-2 extensions
/// (`FOR_MPI2`): their callback tables are larger.
pub const MQS_INTERFACE_COMPATIBILITY_MPI2: c_int = 3;

pub const mqs_ok: c_int = 0;
pub const mqs_no_information: c_int = 1;
pub const mqs_end_of_list: c_int = 2;
pub const mqs_first_user_code: c_int = 100;

pub const MQS_INVALID_PROCESS: c_int = -1;

// mqs_op_class
pub const mqs_pending_sends: c_int = 0;
pub const mqs_pending_receives: c_int = 1;
pub const mqs_unexpected_messages: c_int = 2;

// enum mqs_status
pub const mqs_st_pending: c_int = 0;
pub const mqs_st_matched: c_int = 1;
pub const mqs_st_complete: c_int = 2;

// mqs_lang_code
pub type mqs_lang_code = c_int;
pub const mqs_lang_c: mqs_lang_code = b'c' as c_int;

/// Opaque handles; the library only passes them back.
#[repr(C)]
pub struct mqs_image {
    _private: [u8; 0],
}
#[repr(C)]
pub struct mqs_process {
    _private: [u8; 0],
}
#[repr(C)]
pub struct mqs_type {
    _private: [u8; 0],
}
#[repr(C)]
pub struct mqs_image_info {
    _private: [u8; 0],
}
#[repr(C)]
pub struct mqs_process_info {
    _private: [u8; 0],
}

/// The five fields common to every library's `mqs_target_type_sizes`.
/// Open MPI's has two more (bool, size_t) that it never reads from us:
/// writing them into MPICH's 5-int struct would corrupt its stack.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct mqs_target_type_sizes {
    pub short_size: c_int,
    pub int_size: c_int,
    pub long_size: c_int,
    pub long_long_size: c_int,
    pub pointer_size: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct mqs_communicator {
    pub unique_id: mqs_taddr_t,
    pub local_rank: mqs_tword_t,
    pub size: mqs_tword_t,
    pub name: [c_char; 64],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct mqs_pending_operation {
    pub status: c_int,
    pub desired_local_rank: mqs_tword_t,
    pub desired_global_rank: mqs_tword_t,
    pub tag_wild: c_int,
    pub desired_tag: mqs_tword_t,
    pub desired_length: mqs_tword_t,
    pub system_buffer: c_int,
    pub buffer: mqs_taddr_t,
    pub actual_local_rank: mqs_tword_t,
    pub actual_global_rank: mqs_tword_t,
    pub actual_tag: mqs_tword_t,
    pub actual_length: mqs_tword_t,
    pub extra_text: [[c_char; 64]; 5],
}

pub type mqs_malloc_ft = unsafe extern "C" fn(size: usize) -> *mut c_void;
pub type mqs_free_ft = unsafe extern "C" fn(buf: *mut c_void);
pub type mqs_dprints_ft = unsafe extern "C" fn(text: *const c_char);
pub type mqs_errorstring_ft = unsafe extern "C" fn(code: c_int) -> *mut c_char;
pub type mqs_put_image_info_ft = unsafe extern "C" fn(image: *mut mqs_image, info: *mut mqs_image_info);
pub type mqs_get_image_info_ft = unsafe extern "C" fn(image: *mut mqs_image) -> *mut mqs_image_info;
pub type mqs_put_process_info_ft = unsafe extern "C" fn(process: *mut mqs_process, info: *mut mqs_process_info);
pub type mqs_get_process_info_ft = unsafe extern "C" fn(process: *mut mqs_process) -> *mut mqs_process_info;

pub type mqs_get_type_sizes_ft = unsafe extern "C" fn(process: *mut mqs_process, sizes: *mut mqs_target_type_sizes);
pub type mqs_find_function_ft = unsafe extern "C" fn(
    image: *mut mqs_image,
    name: *mut c_char,
    lang: mqs_lang_code,
    addr: *mut mqs_taddr_t,
) -> c_int;
pub type mqs_find_symbol_ft =
    unsafe extern "C" fn(image: *mut mqs_image, name: *mut c_char, addr: *mut mqs_taddr_t) -> c_int;
pub type mqs_find_type_ft =
    unsafe extern "C" fn(image: *mut mqs_image, name: *mut c_char, lang: mqs_lang_code) -> *mut mqs_type;
pub type mqs_field_offset_ft = unsafe extern "C" fn(ty: *mut mqs_type, field: *mut c_char) -> c_int;
pub type mqs_sizeof_ft = unsafe extern "C" fn(ty: *mut mqs_type) -> c_int;

pub type mqs_get_global_rank_ft = unsafe extern "C" fn(process: *mut mqs_process) -> c_int;
pub type mqs_get_image_ft = unsafe extern "C" fn(process: *mut mqs_process) -> *mut mqs_image;
pub type mqs_fetch_data_ft =
    unsafe extern "C" fn(process: *mut mqs_process, addr: mqs_taddr_t, size: c_int, buf: *mut c_void) -> c_int;
pub type mqs_target_to_host_ft =
    unsafe extern "C" fn(process: *mut mqs_process, indata: *const c_void, outdata: *mut c_void, size: c_int);

#[repr(C)]
pub struct mqs_basic_callbacks {
    pub mqs_malloc_fp: mqs_malloc_ft,
    pub mqs_free_fp: mqs_free_ft,
    pub mqs_dprints_fp: mqs_dprints_ft,
    pub mqs_errorstring_fp: mqs_errorstring_ft,
    pub mqs_put_image_info_fp: mqs_put_image_info_ft,
    pub mqs_get_image_info_fp: mqs_get_image_info_ft,
    pub mqs_put_process_info_fp: mqs_put_process_info_ft,
    pub mqs_get_process_info_fp: mqs_get_process_info_ft,
}

#[repr(C)]
pub struct mqs_image_callbacks {
    pub mqs_get_type_sizes_fp: mqs_get_type_sizes_ft,
    pub mqs_find_function_fp: mqs_find_function_ft,
    pub mqs_find_symbol_fp: mqs_find_symbol_ft,
    pub mqs_find_type_fp: mqs_find_type_ft,
    pub mqs_field_offset_fp: mqs_field_offset_ft,
    pub mqs_sizeof_fp: mqs_sizeof_ft,
}

#[repr(C)]
pub struct mqs_process_callbacks {
    pub mqs_get_global_rank_fp: mqs_get_global_rank_ft,
    pub mqs_get_image_fp: mqs_get_image_ft,
    pub mqs_fetch_data_fp: mqs_fetch_data_ft,
    pub mqs_target_to_host_fp: mqs_target_to_host_ft,
}

// The entry points a debug library exports.
pub type mqs_setup_basic_callbacks_fn = unsafe extern "C" fn(cb: *const mqs_basic_callbacks);
pub type mqs_version_string_fn = unsafe extern "C" fn() -> *mut c_char;
pub type mqs_version_compatibility_fn = unsafe extern "C" fn() -> c_int;
pub type mqs_dll_taddr_width_fn = unsafe extern "C" fn() -> c_int;
pub type mqs_dll_error_string_fn = unsafe extern "C" fn(code: c_int) -> *mut c_char;
pub type mqs_setup_image_fn = unsafe extern "C" fn(image: *mut mqs_image, cb: *const mqs_image_callbacks) -> c_int;
pub type mqs_image_has_queues_fn = unsafe extern "C" fn(image: *mut mqs_image, message: *mut *mut c_char) -> c_int;
pub type mqs_destroy_image_info_fn = unsafe extern "C" fn(info: *mut mqs_image_info);
pub type mqs_setup_process_fn =
    unsafe extern "C" fn(process: *mut mqs_process, cb: *const mqs_process_callbacks) -> c_int;
pub type mqs_destroy_process_info_fn = unsafe extern "C" fn(info: *mut mqs_process_info);
pub type mqs_process_has_queues_fn =
    unsafe extern "C" fn(process: *mut mqs_process, message: *mut *mut c_char) -> c_int;
pub type mqs_process_fn = unsafe extern "C" fn(process: *mut mqs_process) -> c_int;
pub type mqs_get_communicator_fn =
    unsafe extern "C" fn(process: *mut mqs_process, comm: *mut mqs_communicator) -> c_int;
pub type mqs_get_comm_group_fn = unsafe extern "C" fn(process: *mut mqs_process, members: *mut c_int) -> c_int;
pub type mqs_setup_operation_iterator_fn = unsafe extern "C" fn(process: *mut mqs_process, op: c_int) -> c_int;
pub type mqs_next_operation_fn =
    unsafe extern "C" fn(process: *mut mqs_process, op: *mut mqs_pending_operation) -> c_int;

impl mqs_communicator {
    /// All zero: an empty name, rank and size 0.
    pub fn zeroed() -> Self {
        // SAFETY: plain integers and a char array: all-zero is a valid value.
        unsafe { std::mem::zeroed() }
    }
}

impl mqs_pending_operation {
    /// Size of one record: the struct's bytes as the library wrote them.
    pub const RECORD: usize = size_of::<mqs_pending_operation>();

    /// All zero, padding included.
    pub fn zeroed() -> Self {
        // SAFETY: plain integers and char arrays: all-zero is a valid value.
        unsafe { std::mem::zeroed() }
    }

    /// This value's bytes. Only for a value made by [`Self::zeroed`] and
    /// then written by the library in place (never moved or copied by
    /// value), whose padding is therefore zero.
    pub(crate) fn record(&self) -> &[u8] {
        // SAFETY: `self` is a live value of RECORD bytes; its padding bytes
        // are the zeros `zeroed` wrote (the library writes fields, and the
        // caller keeps the value in place), so every byte is initialised.
        unsafe { std::slice::from_raw_parts((self as *const Self).cast::<u8>(), Self::RECORD) }
    }

    /// The operation in a record of [`Self::RECORD`] bytes.
    pub fn from_record(record: &[u8]) -> Option<Self> {
        if record.len() != Self::RECORD {
            return None;
        }
        // SAFETY: `record` holds RECORD bytes, a whole mqs_pending_operation:
        // plain integers and char arrays, for which every bit pattern is
        // valid; read unaligned.
        Some(unsafe { std::ptr::read_unaligned(record.as_ptr().cast()) })
    }
}

// Layout checks against the LP64 C header.
// `unsigned long` and `long` are 8 bytes on the LP64 hosts mpiq supports.
const _: () = assert!(size_of::<c_ulong>() == 8 && size_of::<c_long>() == 8);
const _: () = assert!(size_of::<mqs_target_type_sizes>() == 20);
const _: () = assert!(size_of::<mqs_communicator>() == 88);
const _: () = assert!(offset_of!(mqs_communicator, name) == 24);
const _: () = assert!(offset_of!(mqs_pending_operation, desired_local_rank) == 8);
const _: () = assert!(offset_of!(mqs_pending_operation, tag_wild) == 24);
const _: () = assert!(offset_of!(mqs_pending_operation, desired_tag) == 32);
const _: () = assert!(offset_of!(mqs_pending_operation, system_buffer) == 48);
const _: () = assert!(offset_of!(mqs_pending_operation, buffer) == 56);
const _: () = assert!(offset_of!(mqs_pending_operation, actual_length) == 88);
const _: () = assert!(offset_of!(mqs_pending_operation, extra_text) == 96);
const _: () = assert!(size_of::<mqs_pending_operation>() == 416);
const _: () = assert!(size_of::<mqs_basic_callbacks>() == 8 * 8);
const _: () = assert!(offset_of!(mqs_basic_callbacks, mqs_dprints_fp) == 16);
const _: () = assert!(offset_of!(mqs_basic_callbacks, mqs_errorstring_fp) == 24);
const _: () = assert!(size_of::<mqs_image_callbacks>() == 6 * 8);
const _: () = assert!(size_of::<mqs_process_callbacks>() == 4 * 8);
