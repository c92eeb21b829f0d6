//! The front end's side of a dump in the helper: start or reuse it, answer
//! its questions from the target, take its result.

use std::path::Path;
use std::time::Duration;

use super::error::{Ending, IsolateError};
use super::helper::Helper;
use super::protocol::{decode_operations, Answer, Carried, FromHost, Query, Start};
use super::transport::{send, send_with, LineReader, ReadLine};
use super::{known, sys};
use crate::dump::{convert_operations, Attempt};
use crate::options::DumpOptions;
use crate::snapshot::model::{DllInfo, DllSource, ProcessSnapshot};
use crate::target::{ByteOrder, Target, TargetError, TypeId};

/// How long the library may be silent by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the library may be silent after an interruption was answered.
const INTERRUPT_GRACE: Duration = Duration::from_secs(1);
/// The answer to `q`, and for a read the bytes that follow it; a read goes
/// into the shared region at `read_at`, if there is one.
fn answer(target: &mut dyn Target, q: &Query, region: Option<&mut sys::Region>, read_at: usize) -> (Answer, Vec<u8>) {
    let none = |a: Answer| (a, Vec::new());
    let value = |r: Result<Option<u64>, TargetError>| match r {
        Ok(v) => Answer::Value(v),
        Err(e) => Answer::Failed(e),
    };
    match q {
        &Query::Read { addr, len } => {
            let Ok(n) = usize::try_from(len) else {
                return none(Answer::Failed(TargetError::Host("read too large".into())));
            };
            if n > 64 << 20 {
                return none(Answer::Failed(TargetError::Host(format!("refusing a {n}-byte read"))));
            }
            if let Some(into) = region.and_then(|r| r.slice_at(read_at, n)) {
                return match target.read_memory(addr, into) {
                    Ok(()) => none(Answer::Shared {
                        at: read_at as u64,
                        len,
                    }),
                    Err(e) => none(Answer::Failed(e)),
                };
            }
            let mut buf = vec![0u8; n];
            match target.read_memory(addr, &mut buf) {
                Ok(()) => (Answer::Bytes(len), buf),
                Err(e) => none(Answer::Failed(e)),
            }
        }
        Query::Symbol(n) => none(value(target.find_symbol(n))),
        Query::Function(n) => none(value(target.find_function(n))),
        Query::Type(n) => none(value(target.find_type(n).map(|t| t.map(|t| t.0)))),
        Query::Field { ty, field } => none(value(target.field_offset(TypeId(*ty), field))),
        Query::Size(ty) => none(value(target.size_of(TypeId(*ty)))),
        Query::TypeSizes => none(match target.type_sizes() {
            Ok(s) => Answer::Sizes(s),
            Err(e) => Answer::Failed(e),
        }),
    }
}

/// Runs the library at `dll` in `mpiq-dllhost` (the one kept from this
/// process's last dump, or a new one) and answers its questions from
/// `target` until it is done, dies, or is silent too long.
pub fn run(
    host: &Path,
    target: &mut dyn Target,
    dll: &Path,
    source: DllSource,
    opts: &DumpOptions,
    known_rank: Option<i32>,
) -> Result<ProcessSnapshot, Attempt> {
    let timeout = opts.timeout_ms.map_or(DEFAULT_TIMEOUT, Duration::from_millis);
    let failed = |target: &mut dyn Target, why: IsolateError| {
        let desc = target.describe();
        Ok(ProcessSnapshot {
            dll: Some(DllInfo {
                path: dll.display().to_string(),
                version: String::new(),
                found_via: source,
            }),
            error: Some(why.to_string()),
            ..ProcessSnapshot::new(desc.pid, known_rank, desc.executable)
        })
    };
    // The kept helper first; once more with a new one if it was dead.
    let mut reuse = true;
    loop {
        let kept = if reuse { Helper::take_kept(host, dll) } else { None };
        let reused = kept.is_some();
        let mut helper = match kept {
            Some(h) => h,
            None => match Helper::spawn(host, dll) {
                Ok(h) => h,
                Err(why) => return failed(target, why),
            },
        };
        // Answer what the library asked in earlier dumps now, in this process,
        // and read what it read then into the region; live reads go after that.
        let (answered, mut learner) = known::Known::prepare(target, dll, helper.region.as_mut());
        let read_at = answered.prefetched_end();
        let start = Start {
            dll: dll.to_path_buf(),
            source,
            process: target.describe(),
            big_endian: target.byte_order() == ByteOrder::Big,
            world_rank: known_rank,
            stats: opts.stats,
            known: answered,
            shared: helper.region.as_ref().map(|_| sys::SIZE as u64),
        };
        let mut outcome = None;
        // Whether the helper said anything this dump.
        let mut heard = false;
        // Once a question was answered "interrupted" (Ctrl-C), every callback
        // fails and the library should return soon; one that ignores the errors
        // and loops would keep the user waiting for the whole deadline.
        let mut interrupted = false;
        if send(&mut helper.sock, &start).is_ok() {
            loop {
                match helper.reader.next(if interrupted {
                    timeout.min(INTERRUPT_GRACE)
                } else {
                    timeout
                }) {
                    ReadLine::Line(line) => match serde_json::from_str::<FromHost>(&line) {
                        Ok(FromHost::Query(q)) => {
                            heard = true;
                            let (a, raw) = answer(target, &q, helper.region.as_mut(), read_at);
                            interrupted |= matches!(a, Answer::Failed(TargetError::Interrupted));
                            learner.observe(&q, &a);
                            if send_with(&mut helper.sock, &a, &raw).is_err() {
                                break;
                            }
                        }
                        Ok(FromHost::Done {
                            mut result,
                            operations,
                            prefetched_used,
                        }) => {
                            let Helper { reader, region, .. } = &mut helper;
                            if let Err(why) =
                                receive_operations(reader, region.as_mut(), &mut result, operations, timeout)
                            {
                                return failed(target, IsolateError::Protocol { what: "a result", why });
                            }
                            if result.is_ok() {
                                learner.took_prefetched(&prefetched_used);
                                learner.remember();
                            }
                            helper.keep();
                            return *result;
                        }
                        Err(e) => {
                            outcome = Some(failed(
                                target,
                                IsolateError::Protocol {
                                    what: "a message",
                                    why: e.to_string(),
                                },
                            ));
                            break;
                        }
                    },
                    ReadLine::TimedOut => {
                        drop(helper);
                        if interrupted {
                            return Err(Attempt::Interrupted);
                        }
                        return failed(
                            target,
                            IsolateError::Silent {
                                dll: dll.to_path_buf(),
                                timeout,
                            },
                        );
                    }
                    ReadLine::Failed(e) => {
                        // A kept helper killed between dumps can reset the
                        // connection rather than close it: retried below
                        // like one that closed it.
                        if !(reused && !heard && !interrupted) {
                            outcome = Some(failed(target, IsolateError::LostContact(e)));
                        }
                        break;
                    }
                    ReadLine::Eof => break,
                }
            }
        }
        if let Some(r) = outcome {
            return r;
        }
        // The helper is gone without finishing: say how it died.
        let status = helper.child.wait();
        drop(helper);
        if reused && !heard && !interrupted {
            // A kept helper that died between dumps (killed, or its parent
            // thread ended) may still have looked alive, and its socket ends
            // with end of file or a reset: once more, with a new one. A
            // library that crashes right away crashes that one too.
            reuse = false;
            continue;
        }
        if interrupted {
            return Err(Attempt::Interrupted);
        }
        return failed(
            target,
            IsolateError::Died {
                dll: dll.to_path_buf(),
                how: Ending::of(status),
            },
        );
    }
}

/// Reads the records of a result's operations (from the region or after
/// the line) and converts them into the result's queues.
fn receive_operations(
    reader: &mut LineReader,
    region: Option<&mut sys::Region>,
    result: &mut Result<ProcessSnapshot, Attempt>,
    carried: Carried,
    timeout: Duration,
) -> Result<(), String> {
    let inline;
    let bytes: &[u8] = match carried {
        Carried::Region(n) => {
            let n = usize::try_from(n).map_err(|e| e.to_string())?;
            match region.and_then(|r| r.slice(n)) {
                Some(b) => b,
                None => return Err(format!("{n} bytes of operations in a region mpiq has not got")),
            }
        }
        Carried::Inline(n) => {
            inline = reader.raw(usize::try_from(n).map_err(|e| e.to_string())?, timeout)?;
            &inline
        }
    };
    if let Ok(snap) = result {
        let raw = decode_operations(bytes, snap.communicators.len())?;
        convert_operations(snap, &raw).map_err(|e| e.to_string())?;
    }
    Ok(())
}
