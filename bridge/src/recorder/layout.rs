//! Where the reader finds each field: the sizes and offsets of layout
//! version 1, as `recorder/mpiq_recorder.h` states them. The header is the
//! one source: its `_Static_assert`s tie each number to the C structs (the
//! C compiler checks them whenever the recorder is built), and the test
//! below ties every number here to the header's.

/// Declares the offsets (and, for tests, which field of which struct each
/// one is).
macro_rules! offsets {
    ($($name:ident = $ty:literal . $field:literal @ $at:literal;)*) => {
        $(
            #[doc = concat!("`", $ty, ".", $field, "`")]
            pub const $name: usize = $at;
        )*
        /// (struct, field, offset) of every offset above.
        #[cfg(test)]
        pub const ALL: &[(&str, &str, usize)] = &[$(($ty, $field, $at)),*];
    };
}

/// `sizeof(struct mpiq_recorder_header)`
pub const HEADER_LEN: usize = 120;
/// `sizeof(struct mpiq_recorder_call_record)`
pub const CALL_LEN: usize = 88;
/// `sizeof(struct mpiq_recorder_pending)`
pub const PENDING_LEN: usize = 80;
/// `sizeof(struct mpiq_recorder_comm)`
pub const COMM_LEN: usize = 32;

/// (struct, size) of every size above.
#[cfg(test)]
pub const SIZES: &[(&str, usize)] = &[
    ("mpiq_recorder_header", HEADER_LEN),
    ("mpiq_recorder_call_record", CALL_LEN),
    ("mpiq_recorder_pending", PENDING_LEN),
    ("mpiq_recorder_comm", COMM_LEN),
];

offsets! {
    H_VERSION = "mpiq_recorder_header"."version" @ 8;
    H_FLAVOUR = "mpiq_recorder_header"."flavour" @ 16;
    H_INITIALIZED = "mpiq_recorder_header"."initialized" @ 20;
    H_WORLD_RANK = "mpiq_recorder_header"."world_rank" @ 24;
    H_WORLD_SIZE = "mpiq_recorder_header"."world_size" @ 28;
    H_COMM_WORLD = "mpiq_recorder_header"."comm_world" @ 32;
    H_CALLS_STARTED = "mpiq_recorder_header"."calls_started" @ 48;
    H_PENDING_DROPPED = "mpiq_recorder_header"."pending_dropped" @ 56;
    H_CALLS_OFFSET = "mpiq_recorder_header"."calls_offset" @ 72;
    H_NCALLS = "mpiq_recorder_header"."ncalls" @ 76;
    H_CALL_SIZE = "mpiq_recorder_header"."call_size" @ 80;
    H_PENDING_OFFSET = "mpiq_recorder_header"."pending_offset" @ 84;
    H_NPENDING = "mpiq_recorder_header"."npending" @ 88;
    H_PENDING_SIZE = "mpiq_recorder_header"."pending_size" @ 92;
    H_COMMS_OFFSET = "mpiq_recorder_header"."comms_offset" @ 96;
    H_NCOMMS = "mpiq_recorder_header"."ncomms" @ 100;
    H_COMM_SIZE = "mpiq_recorder_header"."comm_size" @ 104;
    H_WORLD_RANKS_OFFSET = "mpiq_recorder_header"."world_ranks_offset" @ 108;
    H_NWORLD_RANKS = "mpiq_recorder_header"."nworld_ranks" @ 112;
    H_WORLD_RANKS_USED = "mpiq_recorder_header"."world_ranks_used" @ 116;

    C_SEQ = "mpiq_recorder_call_record"."seq" @ 0;
    C_START_NS = "mpiq_recorder_call_record"."start_ns" @ 8;
    C_END_NS = "mpiq_recorder_call_record"."end_ns" @ 16;
    C_COMM = "mpiq_recorder_call_record"."comm" @ 24;
    C_REQUEST = "mpiq_recorder_call_record"."request" @ 32;
    C_COLL_SEQ = "mpiq_recorder_call_record"."coll_seq" @ 40;
    C_CALL = "mpiq_recorder_call_record"."call" @ 48;
    C_PEER = "mpiq_recorder_call_record"."peer" @ 52;
    C_TAG = "mpiq_recorder_call_record"."tag" @ 56;
    C_COUNT = "mpiq_recorder_call_record"."count" @ 60;
    C_TYPE_SIZE = "mpiq_recorder_call_record"."type_size" @ 64;
    C_TID = "mpiq_recorder_call_record"."tid" @ 68;
    C_PEER2 = "mpiq_recorder_call_record"."peer2" @ 72;
    C_TAG2 = "mpiq_recorder_call_record"."tag2" @ 76;
    C_REQUESTS_ACTIVE = "mpiq_recorder_call_record"."requests_active" @ 80;
    C_REQUESTS_KNOWN = "mpiq_recorder_call_record"."requests_known" @ 84;

    P_STATE = "mpiq_recorder_pending"."state" @ 0;
    P_CALL = "mpiq_recorder_pending"."call" @ 4;
    P_REQUEST = "mpiq_recorder_pending"."request" @ 8;
    P_CALL_SEQ = "mpiq_recorder_pending"."call_seq" @ 16;
    P_COMM = "mpiq_recorder_pending"."comm" @ 24;
    P_START_NS = "mpiq_recorder_pending"."start_ns" @ 32;
    P_COLL_SEQ = "mpiq_recorder_pending"."coll_seq" @ 40;
    P_PEER = "mpiq_recorder_pending"."peer" @ 48;
    P_TAG = "mpiq_recorder_pending"."tag" @ 52;
    P_COUNT = "mpiq_recorder_pending"."count" @ 56;
    P_TYPE_SIZE = "mpiq_recorder_pending"."type_size" @ 60;
    P_WAITED_BY = "mpiq_recorder_pending"."waited_by" @ 64;
    P_FLAGS = "mpiq_recorder_pending"."flags" @ 72;

    M_STATE = "mpiq_recorder_comm"."state" @ 0;
    M_RANK = "mpiq_recorder_comm"."rank" @ 4;
    M_HANDLE = "mpiq_recorder_comm"."handle" @ 8;
    M_COLLECTIVES = "mpiq_recorder_comm"."collectives" @ 16;
    M_SIZE = "mpiq_recorder_comm"."size" @ 24;
    M_WORLD_FIRST = "mpiq_recorder_comm"."world_first" @ 28;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (struct, field, offset) as the header asserts it.
    type Offset = (String, String, usize);

    /// The header's `MPIQ_AT(type, field, at);` lines and its
    /// `_Static_assert(sizeof(struct type) == n, ...)` lines.
    fn header() -> (Vec<Offset>, Vec<(String, usize)>) {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../recorder/mpiq_recorder.h");
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let mut at = Vec::new();
        let mut sizes = Vec::new();
        for line in text.lines() {
            if let Some(args) = line.strip_prefix("MPIQ_AT(").and_then(|l| l.strip_suffix(");")) {
                let parts: Vec<&str> = args.split(',').map(str::trim).collect();
                assert_eq!(parts.len(), 3, "{line}");
                at.push((parts[0].into(), parts[1].into(), parts[2].parse().expect(line)));
            } else if let Some(rest) = line.strip_prefix("_Static_assert(sizeof(struct ") {
                let (ty, rest) = rest.split_once(')').expect(line);
                let n = rest.trim_start_matches(" == ").split(',').next().expect(line);
                sizes.push((ty.to_string(), n.trim().parse().expect(line)));
            }
        }
        assert!(
            at.len() > 50 && sizes.len() == 4,
            "the header's asserts were not read: {at:?} {sizes:?}"
        );
        (at, sizes)
    }

    #[test]
    fn every_offset_is_the_headers() {
        let (at, _) = header();
        for &(ty, field, off) in ALL {
            let said = at
                .iter()
                .find(|(t, f, _)| t == ty && f == field)
                .unwrap_or_else(|| panic!("mpiq_recorder.h asserts no offset of {ty}.{field}"));
            assert_eq!(said.2, off, "{ty}.{field}");
        }
    }

    #[test]
    fn every_size_is_the_headers() {
        let (_, sizes) = header();
        assert_eq!(sizes.len(), SIZES.len());
        for &(ty, n) in SIZES {
            assert!(
                sizes.contains(&(ty.to_string(), n)),
                "sizeof(struct {ty}): {n}, the header: {sizes:?}"
            );
        }
    }
}
