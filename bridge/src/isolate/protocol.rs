//! The messages between the front end and `mpiq-dllhost`: one JSON line
//! each, the bytes of a read or the records of a result after their line
//! or in the shared region.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::error::ProtocolError;
use super::known;
use crate::dump::{Attempt, RawOperations};
use crate::options::DumpOptions;
use crate::snapshot::model::{DllSource, ProcessSnapshot};
use crate::target::question::{Answer, Question};
use crate::target::{ProcessDescription, TargetError};

/// What the front end tells the helper first.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Start {
    pub(super) dll: PathBuf,
    pub(super) source: DllSource,
    pub(super) process: ProcessDescription,
    pub(super) big_endian: bool,
    pub(super) world_rank: Option<i32>,
    /// The dump's options, whole: the helper runs the dump with them.
    pub(super) opts: DumpOptions,
    /// Lookups answered before the start ([`known`]).
    #[serde(default)]
    pub(super) known: known::Known,
    /// Size of the shared region sent before the start message, if any.
    #[serde(default)]
    pub(super) shared: Option<u64>,
}

/// The front end's reply to a question from the helper.
#[derive(Debug, Serialize, Deserialize)]
pub(super) enum Reply {
    /// The bytes of a read: this many follow the line, raw.
    Bytes(u64),
    /// The bytes of a read are in the shared region, at this offset.
    Shared {
        at: u64,
        len: u64,
    },
    /// The answer to a lookup.
    Answer(Answer),
    Failed(TargetError),
}

/// A message from the helper.
#[derive(Debug, Serialize, Deserialize)]
pub(super) enum FromHost {
    /// A question, types by the host's ids.
    Query(Question),
    /// The result, without its operations: their records
    /// ([`encode_operations`]) are in the shared region or follow the line.
    Done {
        result: Box<Result<ProcessSnapshot, Attempt>>,
        operations: Carried,
        /// The blocks read ahead that the library used (address, length).
        #[serde(default)]
        prefetched_used: Vec<(u64, u64)>,
    },
}

/// Where the records of a result's operations are: this many bytes at the
/// start of the shared region, or right after the line.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub(super) enum Carried {
    Region(u64),
    Inline(u64),
}

/// The bytes [`encode_operations`] writes.
pub(super) fn encoded_len(raw: &RawOperations) -> usize {
    raw.iter().flatten().map(|q| 8 + q.len()).sum()
}

/// Writes the records of every queue in order, each queue as its length in
/// bytes (u64, little endian) and its records, through `out`.
pub(super) fn encode_operations(raw: &RawOperations, mut out: impl FnMut(&[u8])) {
    for queue in raw.iter().flatten() {
        out(&(queue.len() as u64).to_le_bytes());
        out(queue);
    }
}

/// Splits what [`encode_operations`] wrote for `comms` communicators.
pub(super) fn decode_operations(mut bytes: &[u8], comms: usize) -> Result<Vec<[&[u8]; 3]>, ProtocolError> {
    let mut next = || -> Result<&[u8], ProtocolError> {
        let (len, rest) = bytes.split_first_chunk::<8>().ok_or(ProtocolError::OperationsEnd)?;
        let len = usize::try_from(u64::from_le_bytes(*len))?;
        if len > rest.len() {
            return Err(ProtocolError::QueueTooLong { len, left: rest.len() });
        }
        let (queue, rest) = rest.split_at(len);
        bytes = rest;
        Ok(queue)
    };
    let mut all = Vec::with_capacity(comms);
    for _ in 0..comms {
        all.push([next()?, next()?, next()?]);
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The records of every queue come back split as they were, and a
    /// short or lying stream is an error, not a panic.
    #[test]
    fn operation_records_travel_and_split_back() {
        let raw: RawOperations = vec![
            [vec![1; 3], Vec::new(), vec![2; 5]],
            [Vec::new(), vec![3; 1], Vec::new()],
        ];
        let mut bytes = Vec::new();
        encode_operations(&raw, |b| bytes.extend_from_slice(b));
        assert_eq!(bytes.len(), encoded_len(&raw));
        let back = decode_operations(&bytes, 2).unwrap();
        let expected: Vec<[&[u8]; 3]> = raw.iter().map(|[a, b, c]| [&a[..], &b[..], &c[..]]).collect();
        assert_eq!(back, expected);
        assert!(decode_operations(&bytes, 3).is_err());
        assert!(decode_operations(&bytes[..bytes.len() - 1], 2).is_err());
        let mut lying = bytes.clone();
        lying[0] = 0xff;
        assert!(decode_operations(&lying, 2).is_err());
    }
}
