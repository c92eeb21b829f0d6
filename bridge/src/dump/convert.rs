//! From the library's raw structs to the model, smoothing over what the
//! real libraries do (see MQD-FIELD-NOTES): Open MPI's zero-extended 32-bit
//! -1, MPICH's unknown global ranks, names padded with NULs.

#![allow(non_upper_case_globals)] // the mqs_* constants keep the header's names

use std::ffi::c_char;

use crate::ffi::abi::*;
use crate::snapshot::model::*;

/// Records that do not fit the snapshot they came with.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    /// Records for another number of communicators.
    #[error("operations of {got} communicators for {expected}")]
    Communicators {
        /// Communicators the records are for.
        got: usize,
        /// Communicators in the snapshot.
        expected: usize,
    },
    /// Bytes that are not a whole number of records.
    #[error("{0} bytes of operations")]
    PartRecord(usize),
}

/// The operations of a dump as the library returned them: per communicator
/// of the snapshot, the records (`mqs_pending_operation`, as bytes) of its
/// three queues. [`convert_operations`] turns them into the snapshot's
/// operations once every communicator is read; the helper hands them to the
/// front end as they are, which is cheaper than encoding ten thousand
/// converted operations and decoding them again.
pub type RawOperations = Vec<[Vec<u8>; 3]>;

/// Fills the queues of `snap` from the records of [`RawOperations`]
/// (one entry per communicator, in order).
pub(crate) fn convert_operations(snap: &mut ProcessSnapshot, raw: &[[&[u8]; 3]]) -> Result<(), ConvertError> {
    if raw.len() != snap.communicators.len() {
        return Err(ConvertError::Communicators {
            got: raw.len(),
            expected: snap.communicators.len(),
        });
    }
    for (comm, queues) in snap.communicators.iter_mut().zip(raw) {
        for (kind, bytes) in QueueKind::ALL.into_iter().zip(queues) {
            if bytes.len() % mqs_pending_operation::RECORD != 0 {
                return Err(ConvertError::PartRecord(bytes.len()));
            }
            let operations = bytes
                .chunks_exact(mqs_pending_operation::RECORD)
                .filter_map(mqs_pending_operation::from_record)
                .map(|op| operation(&op, kind, comm))
                .collect();
            comm.queues.get_mut(kind).operations = operations;
        }
    }
    Ok(())
}

/// A rank or tag word: Open MPI stores `int` -1 in `long` fields as
/// 4294967295 (zero-extended), so a value in the upper half of the 32-bit
/// range is a negative `int`. Negative means "any" or "unknown": `None`.
pub(crate) fn word(v: mqs_tword_t) -> Option<i64> {
    let v = signed(v);
    (v >= 0).then_some(v)
}

/// A word with Open MPI's zero-extended negative ints sign-extended.
pub(crate) fn signed(v: mqs_tword_t) -> i64 {
    if (0x8000_0000..=0xffff_ffff).contains(&v) {
        v as u32 as i32 as i64
    } else {
        v
    }
}

/// A length: only the 32-bit -1 is "unknown" (real lengths may pass 2 GiB).
fn length(v: mqs_tword_t) -> Option<i64> {
    (v >= 0 && v != 0xffff_ffff).then_some(v)
}

/// A fixed-size C char array, cut at the first NUL.
fn text(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars.iter().map(|&c| c as u8).take_while(|&b| b != 0).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A communicator (its queues filled in later).
pub(crate) fn communicator(raw: &mqs_communicator, group: Option<Vec<i64>>) -> Communicator {
    let name = text(&raw.name);
    let size = word(raw.size);
    let (world_ranks, source) = match (group, size) {
        (Some(g), _) => (
            Some(g.into_iter().map(|r| (r >= 0).then_some(r)).collect()),
            Some("library"),
        ),
        // MPICH's internal duplicate of MPI_COMM_WORLD has the same group.
        // A size read from corrupt memory can be anything: past 2^24 ranks
        // (the bound collect.rs puts on mqs_get_comm_group too) the list is
        // not built, rather than allocating petabytes and aborting.
        (None, Some(n)) if (name == "MPI_COMM_WORLD" || name == "MPI_ICOMM_WORLD") && (1..=1 << 24).contains(&n) => {
            (Some((0..n).map(Some).collect()), Some("world"))
        }
        _ => (None, None),
    };
    let id = raw.unique_id;
    Communicator {
        id: if id < 0x1_0000 {
            id.to_string()
        } else {
            format!("{id:#x}")
        },
        name,
        size,
        local_rank: word(raw.local_rank),
        world_ranks,
        world_ranks_source: source.map(Text::intern),
        world_ranks_rejected: None,
        queues: Queues {
            sends: Queue::available(Vec::new()),
            receives: Queue::available(Vec::new()),
            unexpected: Queue::available(Vec::new()),
        },
    }
}

/// World rank of a local rank, through the communicator's group.
fn translate(comm: &Communicator, local: Option<i64>) -> Option<i64> {
    let l = usize::try_from(local?).ok()?;
    comm.world_ranks.as_ref()?.get(l).copied().flatten()
}

/// World rank of a peer: through the group, which is reliable; the
/// library's own global rank only when there is no group (Open MPI's is the
/// untranslated local rank for sends).
fn world_of(comm: &Communicator, local: Option<i64>, library_global: mqs_tword_t) -> Option<i64> {
    translate(comm, local).or_else(|| {
        if comm.world_ranks.is_none() && comm.world_ranks_rejected.is_none() && local.is_some() {
            word(library_global)
        } else {
            None
        }
    })
}

/// One operation.
pub(crate) fn operation(raw: &mqs_pending_operation, kind: QueueKind, comm: &Communicator) -> Operation {
    let status = match raw.status {
        mqs_st_pending => Status::Pending,
        mqs_st_matched => Status::Matched,
        mqs_st_complete => Status::Complete,
        _ => Status::Unknown,
    };
    let desired_local = signed(raw.desired_local_rank);
    let any_source = kind == QueueKind::Receives && desired_local == -1;
    let local = (desired_local >= 0).then_some(desired_local);
    let world = world_of(comm, local, raw.desired_global_rank);
    let desired_tag = signed(raw.desired_tag);
    let any_tag = raw.tag_wild != 0 || (kind == QueueKind::Receives && desired_tag == -1);
    let has_actual = kind != QueueKind::Receives || status != Status::Pending;
    let actual = has_actual.then(|| {
        let local = word(raw.actual_local_rank);
        Actual {
            local,
            world: world_of(comm, local, raw.actual_global_rank),
            tag: {
                let t = signed(raw.actual_tag);
                (t != -1).then_some(t)
            },
            length: length(raw.actual_length),
        }
    });
    Operation {
        status,
        peer: Peer { local, world },
        any_source,
        tag: (!any_tag).then_some(desired_tag),
        any_tag,
        // An unexpected message has no user buffer: its length is the
        // message's (MPICH leaves the desired length uninitialised).
        length: if kind == QueueKind::Unexpected {
            length(raw.actual_length)
        } else {
            length(raw.desired_length)
        },
        buffer: format!("{:#x}", raw.buffer),
        system_buffer: raw.system_buffer != 0,
        actual,
        extra_text: raw
            .extra_text
            .iter()
            .map(|l| text(l))
            .filter(|l| !l.trim().is_empty())
            .collect(),
        request: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw_comm(name: &str, size: i64, rank: i64) -> mqs_communicator {
        let mut c = mqs_communicator::zeroed();
        for (i, b) in name.bytes().enumerate() {
            c.name[i] = b as c_char;
        }
        c.size = size as mqs_tword_t;
        c.local_rank = rank as mqs_tword_t;
        c.unique_id = 3;
        c
    }

    #[test]
    fn open_mpi_zero_extended_minus_one_is_a_wildcard() {
        assert_eq!(word(4294967295), None);
        assert_eq!(signed(4294967295), -1);
        assert_eq!(signed(4294967294), -2);
        assert_eq!(word(7), Some(7));
        assert_eq!(word(-1), None);
        let comm = communicator(&raw_comm("MPI_COMM_WORLD", 4, 1), None);
        assert_eq!(comm.world_ranks.as_ref().unwrap().len(), 4);
        let mut op = mqs_pending_operation::zeroed();
        op.desired_local_rank = 4294967295;
        op.desired_global_rank = 4294967295;
        op.desired_tag = 4294967295;
        op.tag_wild = 1;
        op.desired_length = 64;
        op.actual_tag = 4294967295;
        let o = operation(&op, QueueKind::Receives, &comm);
        assert!(o.any_source && o.any_tag);
        assert_eq!(
            (o.peer.local, o.peer.world, o.tag, o.length),
            (None, None, None, Some(64))
        );
        assert_eq!(o.actual, None);
    }

    #[test]
    fn sends_translate_through_the_group_not_the_library() {
        // A split communicator: local 1 is world 2; the library (Open MPI)
        // wrongly reports actual global 1.
        let comm = communicator(&raw_comm("left", 2, 0), Some(vec![0, 2]));
        let mut op = mqs_pending_operation::zeroed();
        op.desired_local_rank = 1;
        op.desired_global_rank = 2;
        op.actual_local_rank = 1;
        op.actual_global_rank = 1;
        op.desired_tag = 5;
        op.actual_tag = 5;
        op.name_line(0, "Data: 4 instances of MPI_");
        let o = operation(&op, QueueKind::Sends, &comm);
        assert_eq!(
            o.peer,
            Peer {
                local: Some(1),
                world: Some(2)
            }
        );
        assert_eq!(o.actual.unwrap().world, Some(2));
        assert_eq!(o.extra_text, vec!["Data: 4 instances of MPI_".to_string()]);
        assert!(!o.any_source);
    }

    #[test]
    fn mpich_without_group_uses_library_global_rank_or_unknown() {
        let comm = communicator(&raw_comm("solver", 4, 1), None);
        assert!(comm.world_ranks.is_none());
        let mut op = mqs_pending_operation::zeroed();
        op.desired_local_rank = 3;
        op.desired_global_rank = -1;
        op.desired_tag = 9;
        let o = operation(&op, QueueKind::Receives, &comm);
        assert_eq!(
            o.peer,
            Peer {
                local: Some(3),
                world: None
            }
        );
        assert_eq!(o.tag, Some(9));
    }

    trait NameLine {
        fn name_line(&mut self, i: usize, s: &str);
    }
    impl NameLine for mqs_pending_operation {
        fn name_line(&mut self, i: usize, s: &str) {
            for (j, b) in s.bytes().enumerate() {
                self.extra_text[i][j] = b as c_char;
            }
        }
    }
}
