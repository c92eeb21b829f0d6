"""bridge/include/mpiq.h for ctypes: the constants, the two structs, the
callback types and the signatures of libmpiq.so's functions.

One of three hand-kept copies of the C API (with mpiq.h and
bridge/src/capi.rs); bridge/tests/c_api_copies_agree.rs checks that their
sizes, field names and offsets and the API version agree. It therefore must
not import gdb: that test imports it with a plain python3.
"""

import ctypes

MPIQ_API_VERSION = 5

# enum mpiq_status: what a target callback returns.
MPIQ_OK = 0
MPIQ_NOT_FOUND = 1
MPIQ_ERROR = 2
MPIQ_INTERRUPTED = 3

# enum mpiq_dump_status: what mpiq_dump returns.
MPIQ_DUMP_OK = 0
MPIQ_DUMP_USAGE = 1
MPIQ_DUMP_FAILED = 2
MPIQ_DUMP_INTERRUPTED = 3


class MpiqTypeSizes(ctypes.Structure):
    """struct mpiq_type_sizes"""

    _fields_ = [
        ("short_size", ctypes.c_int32),
        ("int_size", ctypes.c_int32),
        ("long_size", ctypes.c_int32),
        ("long_long_size", ctypes.c_int32),
        ("pointer_size", ctypes.c_int32),
    ]


_u64p = ctypes.POINTER(ctypes.c_uint64)
_i32p = ctypes.POINTER(ctypes.c_int32)
_c_int = ctypes.c_int
_vp = ctypes.c_void_p
_cp = ctypes.c_char_p

MPIQ_READ_MEMORY = ctypes.CFUNCTYPE(_c_int, _vp, ctypes.c_uint64, ctypes.c_uint64, _vp)
MPIQ_FIND_ADDRESS = ctypes.CFUNCTYPE(_c_int, _vp, _cp, _u64p)  # find_symbol, find_function
MPIQ_FIND_TYPE = ctypes.CFUNCTYPE(_c_int, _vp, _cp, _u64p)
MPIQ_FIELD_OFFSET = ctypes.CFUNCTYPE(_c_int, _vp, ctypes.c_uint64, _cp, _u64p)
MPIQ_SIZE_OF = ctypes.CFUNCTYPE(_c_int, _vp, ctypes.c_uint64, _u64p)
MPIQ_TYPE_SIZES = ctypes.CFUNCTYPE(_c_int, _vp, ctypes.POINTER(MpiqTypeSizes))
MPIQ_INT32_OUT = ctypes.CFUNCTYPE(_c_int, _vp, _i32p)  # byte_order, world_rank
MPIQ_IDENTITY = ctypes.CFUNCTYPE(_c_int, _vp, _vp, ctypes.c_uint64)
MPIQ_STACKS = ctypes.CFUNCTYPE(_c_int, _vp, ctypes.POINTER(_cp))
MPIQ_FRAME_VALUE = ctypes.CFUNCTYPE(_c_int, _vp, ctypes.c_uint64, ctypes.c_uint32, _cp, _u64p)


class MpiqTargetStruct(ctypes.Structure):
    """struct mpiq_target"""

    _fields_ = [
        ("api_version", ctypes.c_uint32),
        ("ctx", _vp),
        ("read_memory", MPIQ_READ_MEMORY),
        ("find_symbol", MPIQ_FIND_ADDRESS),
        ("find_function", MPIQ_FIND_ADDRESS),
        ("find_type", MPIQ_FIND_TYPE),
        ("field_offset", MPIQ_FIELD_OFFSET),
        ("size_of", MPIQ_SIZE_OF),
        ("type_sizes", MPIQ_TYPE_SIZES),
        ("byte_order", MPIQ_INT32_OUT),
        ("world_rank", MPIQ_INT32_OUT),
        ("pid", ctypes.c_int64),
        ("executable", _cp),
        ("identity", MPIQ_IDENTITY),
        ("stacks", MPIQ_STACKS),
        ("frame_value", MPIQ_FRAME_VALUE),
        ("live", ctypes.c_int32),
    ]


# The C name of each struct above: the copy check compares them by these.
C_STRUCTS = {
    "mpiq_type_sizes": MpiqTypeSizes,
    "mpiq_target": MpiqTargetStruct,
}


def declare(lib):
    """Declares libmpiq.so's functions on the ctypes.CDLL `lib`; raises
    AttributeError when one is missing."""
    lib.mpiq_api_version.restype = ctypes.c_uint32
    lib.mpiq_api_version.argtypes = []
    lib.mpiq_dump.restype = ctypes.c_int
    lib.mpiq_dump.argtypes = [
        ctypes.POINTER(ctypes.POINTER(MpiqTargetStruct)), ctypes.c_size_t, _cp,
        ctypes.POINTER(_vp)]
    lib.mpiq_parse_targets.restype = ctypes.c_int
    lib.mpiq_parse_targets.argtypes = [_cp, ctypes.POINTER(_vp)]
    lib.mpiq_set_error.restype = None
    lib.mpiq_set_error.argtypes = [_cp]
    lib.mpiq_free.restype = None
    lib.mpiq_free.argtypes = [_vp]
    lib.mpiq_help.restype = _cp
    lib.mpiq_help.argtypes = []
    lib.mpiq_version.restype = _cp
    lib.mpiq_version.argtypes = []


def parse_targets(lib, spec):
    """The value of --targets parsed by the library (the parser lldb uses
    too): "all" or the inferior numbers named, each once, in the order given;
    raises ValueError with the library's message."""
    out = _vp()
    try:
        rc = lib.mpiq_parse_targets(spec.encode("utf-8", "surrogateescape"), ctypes.byref(out))
        text = ctypes.string_at(out.value).decode("utf-8", "replace") if out.value else ""
    finally:
        lib.mpiq_free(out)
    if rc != MPIQ_DUMP_OK:
        raise ValueError(text)
    return "all" if text == "all" else [int(n) for n in text.split(",")]
