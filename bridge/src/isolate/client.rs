//! The front end's side of a dump in the helper: start or reuse it, answer
//! its questions from the target, take its result.

use std::path::Path;
use std::time::Duration;

use super::error::{Ending, IsolateError, ProtocolError};
use super::helper::Helper;
use super::protocol::{decode_operations, Carried, FromHost, Reply, Start};
use super::transport::{send, send_with, LineReader, ReadLine};
use super::{known, sys};
use crate::dump::{convert_operations, Attempt};
use crate::options::DumpOptions;
use crate::snapshot::model::{DllInfo, DllSource, ProcessSnapshot};
use crate::target::question::Question;
use crate::target::{ByteOrder, Target, TargetError};

/// How long the library may be silent by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the library may be silent after an interruption was answered.
const INTERRUPT_GRACE: Duration = Duration::from_secs(1);
/// The reply to `q`, and for a read the bytes that follow it; a read goes
/// into the shared region at `read_at`, if there is one.
fn answer(target: &mut dyn Target, q: &Question, region: Option<&mut sys::Region>, read_at: usize) -> (Reply, Vec<u8>) {
    let none = |a: Reply| (a, Vec::new());
    let &Question::Read { addr, len } = q else {
        return none(match q.ask(target) {
            Ok(a) => Reply::Answer(a),
            Err(e) => Reply::Failed(e),
        });
    };
    let Ok(n) = usize::try_from(len) else {
        return none(Reply::Failed(TargetError::Host("read too large".into())));
    };
    if n > 64 << 20 {
        return none(Reply::Failed(TargetError::Host(format!("refusing a {n}-byte read"))));
    }
    if let Some(into) = region.and_then(|r| r.slice_at(read_at, n)) {
        return match target.read_memory(addr, into) {
            Ok(()) => none(Reply::Shared {
                at: read_at as u64,
                len,
            }),
            Err(e) => none(Reply::Failed(e)),
        };
    }
    let mut buf = vec![0u8; n];
    match target.read_memory(addr, &mut buf) {
        Ok(()) => (Reply::Bytes(len), buf),
        Err(e) => none(Reply::Failed(e)),
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
                path: dll.display().to_string().into(),
                version: crate::snapshot::model::Text::default(),
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
            opts: opts.clone(),
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
                            interrupted |= matches!(a, Reply::Failed(TargetError::Interrupted));
                            learner.observe(
                                &q,
                                match &a {
                                    Reply::Failed(e) => Err(e),
                                    Reply::Answer(answer) => Ok(Some(answer)),
                                    Reply::Bytes(_) | Reply::Shared { .. } => Ok(None),
                                },
                            );
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
                                    why: e.into(),
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
) -> Result<(), ProtocolError> {
    let inline;
    let bytes: &[u8] = match carried {
        Carried::Region(n) => {
            let n = usize::try_from(n)?;
            match region.and_then(|r| r.slice(n)) {
                Some(b) => b,
                None => return Err(ProtocolError::NoRegion(n)),
            }
        }
        Carried::Inline(n) => {
            inline = reader.raw(usize::try_from(n)?, timeout)?;
            &inline
        }
    };
    if let Ok(snap) = result {
        let raw = decode_operations(bytes, snap.communicators.len())?;
        convert_operations(snap, &raw)?;
    }
    Ok(())
}
