//! Lookups answered before the helper starts. Every question a library asks
//! the helper costs a round trip between two processes (20 to 80 µs on a
//! busy machine), and a library asks the same hundred-odd symbol, type and
//! field questions on every dump. The front end remembers, per library, the
//! questions asked in this process's earlier dumps (by name: type ids are
//! the host's and may differ between dumps), answers them again from the
//! target before starting the helper, and sends the answers with the start
//! message. Nothing is reused across dumps but the list of questions: every
//! answer is fresh, so nothing can go stale. A question the helper does not
//! find answered is asked as before.
//!
//! Memory the same way (`dump::readahead`, shared with `--in-process`): the
//! blocks the library read in the previous dump of the same process are
//! read again, now, into the shared region before the helper starts, and the helper takes them from there without asking (a
//! round trip each, 40-odd per dump at K = 10,000). The bytes are fresh;
//! only the addresses are remembered. A block no longer read costs one read
//! of the target; a new one is asked as before.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use serde::{Deserialize, Serialize};

use super::sys;
use crate::dump::readahead::{self, ProcessKey, Room};
use crate::target::question::{Answer, Question};
use crate::target::{Target, TargetError, TypeId};

/// Most questions remembered per library (the libraries ask about 150).
const MAX_QUESTIONS: usize = 2_000;

/// Questions asked per library path, in the order first asked.
fn learned() -> &'static Mutex<HashMap<PathBuf, Vec<Question<String>>>> {
    static LEARNED: OnceLock<Mutex<HashMap<PathBuf, Vec<Question<String>>>>> = OnceLock::new();
    LEARNED.get_or_init(Default::default)
}

/// Answers computed before the helper starts (part of the start message).
#[derive(Debug, Default, Serialize, Deserialize)]
pub(super) struct Known {
    /// The questions, types by this dump's host ids (as the helper asks
    /// them), and the target's answers.
    answers: Vec<(Question, Answer)>,
    /// Blocks read ahead: address, length, offset in the shared region.
    #[serde(default)]
    prefetched: Vec<(u64, u64, u64)>,
}

/// What the front end learns during one dump.
pub(super) struct Learner {
    dll: PathBuf,
    process: ProcessKey,
    /// Type id -> the name it was found by, this dump.
    names: HashMap<TypeId, String>,
    asked: Vec<Question<String>>,
    /// Blocks the helper asked for, or took from the region.
    reads: Vec<(u64, u64)>,
}

impl Known {
    /// Answers the questions asked in earlier dumps with the library at
    /// `dll`, from `target`, now. A question the target fails to answer is
    /// left to the helper (which then gets the failure itself); an
    /// interruption stops the preparation.
    pub(super) fn prepare(target: &mut dyn Target, dll: &Path, region: Option<&mut sys::Region>) -> (Known, Learner) {
        let questions = learned()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(dll)
            .cloned()
            .unwrap_or_default();
        let desc = target.describe();
        let process = (desc.pid, desc.executable);
        let mut known = Known::default();
        if let Some(region) = region {
            let blocks = readahead::remembered(dll, &process);
            if known.prefetch(target, region, &blocks).is_err() {
                // Interrupted: the helper will be told too.
                return (
                    known,
                    Learner {
                        dll: dll.to_path_buf(),
                        process,
                        names: HashMap::new(),
                        asked: Vec::new(),
                        reads: Vec::new(),
                    },
                );
            }
        }
        let mut learner = Learner {
            dll: dll.to_path_buf(),
            process,
            names: HashMap::new(),
            asked: Vec::new(),
            reads: Vec::new(),
        };
        let mut ids: HashMap<String, TypeId> = HashMap::new();
        for q in questions {
            let r: Result<(), TargetError> = (|| {
                // A field or size of a type not found this time: left to the helper.
                let Some(q) = q.with_types(|name| Ok::<_, TargetError>(ids.get(&name).copied()))? else {
                    return Ok(());
                };
                let a = q.ask(target)?;
                if let (Question::Type(n), Answer::Value(Some(id))) = (&q, &a) {
                    ids.insert(n.clone(), TypeId(*id));
                    learner.names.entry(TypeId(*id)).or_insert_with(|| n.clone());
                }
                known.answers.push((q, a));
                Ok(())
            })();
            if let Err(TargetError::Interrupted) = r {
                break;
            }
        }
        (known, learner)
    }

    /// Reads `blocks` into the region ([`readahead::read_ahead`]); only an
    /// interruption is an error.
    fn prefetch(
        &mut self,
        target: &mut dyn Target,
        region: &mut sys::Region,
        blocks: &[(u64, u64)],
    ) -> Result<(), TargetError> {
        let (read, interrupted) = readahead::read_ahead(target, blocks, region);
        self.prefetched
            .extend(read.into_iter().map(|(addr, len, at)| (addr, len, at as u64)));
        if interrupted {
            return Err(TargetError::Interrupted);
        }
        Ok(())
    }

    /// Where the region is free after the blocks read ahead.
    pub(super) fn prefetched_end(&self) -> usize {
        self.prefetched
            .iter()
            .map(|&(_, len, at)| at + len)
            .max()
            .and_then(|end| usize::try_from(end).ok())
            .unwrap_or(0)
    }

    /// The answers, indexed for the helper.
    pub(super) fn index(self) -> KnownIndex {
        KnownIndex {
            answers: self.answers.into_iter().collect(),
            prefetched: self.prefetched.into_iter().map(|(a, l, at)| ((a, l), at)).collect(),
        }
    }
}

impl Learner {
    /// Notes a question the helper asked and what the target said: its
    /// answer, `Ok(None)` for a read answered (its bytes went to the
    /// helper), or the target's failure.
    pub(super) fn observe(&mut self, q: &Question, answer: Result<Option<&Answer>, &TargetError>) {
        // Only questions the target answered: a failure is asked again next
        // time by the helper itself.
        let Ok(answer) = answer else { return };
        match (q, answer) {
            (&Question::Read { addr, len }, _) => {
                self.reads.push((addr, len));
                return;
            }
            (Question::Type(n), Some(Answer::Value(Some(id)))) => {
                self.names.entry(TypeId(*id)).or_insert_with(|| n.clone());
            }
            _ => {}
        }
        let names = &self.names;
        if let Ok(Some(q)) = q
            .clone()
            .with_types(|ty| Ok::<_, std::convert::Infallible>(names.get(&ty).cloned()))
        {
            self.asked.push(q);
        }
    }

    /// Notes blocks the helper took from the region without asking.
    pub(super) fn took_prefetched(&mut self, blocks: &[(u64, u64)]) {
        self.reads.extend_from_slice(blocks);
    }

    /// Adds what was asked to what the next dump with this library prepares.
    pub(super) fn remember(self) {
        readahead::remember(&self.dll, self.process, self.reads);
        if self.asked.is_empty() {
            return;
        }
        let mut all = learned().lock().unwrap_or_else(|p| p.into_inner());
        let list = all.entry(self.dll).or_default();
        for q in self.asked {
            if list.len() < MAX_QUESTIONS && !list.contains(&q) {
                list.push(q);
            }
        }
    }
}

impl Room for sys::Region {
    fn room(&mut self, at: usize, len: usize) -> Option<&mut [u8]> {
        self.slice_at(at, len)
    }
}

/// [`Known`] on the helper's side.
#[derive(Default)]
pub(super) struct KnownIndex {
    /// The answers, by question (types by this dump's host ids).
    pub answers: HashMap<Question, Answer>,
    /// (address, length) -> offset in the shared region.
    pub prefetched: HashMap<(u64, u64), u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::target::TypeSizes;
    use crate::testkit::Lookups;

    #[test]
    fn questions_of_one_dump_are_answered_afresh_before_the_next() {
        let dll = Path::new("/test/known/libmqs.so");
        let mut first = Lookups::new(4);
        let (known, mut learner) = Known::prepare(&mut first, dll, None);
        assert_eq!(first.asked, 0, "nothing learned yet");
        assert!(known.answers.is_empty());
        // What the helper asked during the first dump, and the answers.
        let failed = TargetError::Host("x".into());
        let value = |v: Option<u64>| Answer::Value(v);
        let dialogue: [(Question, Result<Option<Answer>, &TargetError>); 8] = [
            (Question::Symbol("a".into()), Ok(Some(value(Some(0x10))))),
            (Question::Symbol("gone".into()), Err(&failed)),
            (Question::Type("T".into()), Ok(Some(value(Some(4))))),
            (Question::Type("U".into()), Ok(Some(value(None)))),
            (
                Question::Field {
                    ty: TypeId(4),
                    field: "x".into(),
                },
                Ok(Some(value(Some(8)))),
            ),
            (Question::Size(TypeId(4)), Ok(Some(value(Some(24))))),
            (Question::TypeSizes, Ok(Some(Answer::Sizes(TypeSizes::LP64)))),
            (Question::Read { addr: 0, len: 8 }, Ok(None)),
        ];
        for (q, a) in &dialogue {
            learner.observe(q, a.as_ref().map(Option::as_ref).map_err(|e| *e));
        }
        learner.remember();
        // The next dump: "T" now has another id; the answers follow it.
        let mut second = Lookups::new(9);
        let (known, _) = Known::prepare(&mut second, dll, None);
        assert_eq!(second.reads, 0, "no memory is read before the helper starts");
        assert_eq!(
            second.asked, 6,
            "a, T, U, T.x, sizeof T, type sizes; not the failed one"
        );
        let index = known.index();
        let get = |q: Question| index.answers.get(&q).cloned();
        assert_eq!(get(Question::Symbol("a".into())), Some(value(Some(0x10))));
        assert!(
            get(Question::Symbol("gone".into())).is_none(),
            "a failure is asked again by the helper"
        );
        assert_eq!(get(Question::Type("T".into())), Some(value(Some(9))));
        assert_eq!(get(Question::Type("U".into())), Some(value(None)));
        let field = Question::Field {
            ty: TypeId(9),
            field: "x".into(),
        };
        assert_eq!(get(field), Some(value(Some(8))));
        assert_eq!(get(Question::Size(TypeId(9))), Some(value(Some(24))));
        assert_eq!(get(Question::TypeSizes), Some(Answer::Sizes(TypeSizes::LP64)));
        // Another library learns nothing from this one.
        let (known, _) = Known::prepare(&mut second, Path::new("/test/known/other.so"), None);
        assert!(known.index().answers.is_empty());
    }

    /// The blocks one dump read are read again, fresh, into the region
    /// before the next dump of the same process, one after the other; a
    /// block that cannot be read now is left to the helper; another process
    /// gets nothing read ahead.
    #[test]
    fn blocks_of_one_dump_are_read_ahead_for_the_next_of_that_process() {
        use crate::testkit::Mem;
        let dll = Path::new("/test/known/prefetch.so");
        let mut region = sys::Region::create(1 << 20).unwrap();
        // 0x1000..0x6000 readable; 0xdead000 is not.
        let mut mem = Mem::new(0x1000, 0x5000);
        mem.pid = Some(41);
        let (known, mut learner) = Known::prepare(&mut mem, dll, Some(&mut region));
        assert_eq!((mem.reads, known.prefetched_end()), (0, 0), "nothing learned yet");
        for addr in [0x1000, 0xdead000, 0x3000] {
            learner.observe(&Question::Read { addr, len: 256 }, Ok(None));
        }
        learner.observe(
            &Question::Read { addr: 0x9000, len: 16 },
            Err(&TargetError::Host("x".into())),
        );
        learner.took_prefetched(&[(0x5000, 64)]);
        learner.remember();
        let (known, _) = Known::prepare(&mut mem, dll, Some(&mut region));
        assert_eq!(
            mem.reads, 4,
            "0x1000, 0xdead000 (fails now), 0x3000, 0x5000; not the failed one"
        );
        assert_eq!(known.prefetched_end(), 256 + 256 + 64);
        let index = known.index();
        assert_eq!(index.prefetched.get(&(0x1000, 256)), Some(&0));
        assert_eq!(index.prefetched.get(&(0x3000, 256)), Some(&256));
        assert_eq!(index.prefetched.get(&(0x5000, 64)), Some(&512));
        assert!(!index.prefetched.contains_key(&(0xdead000, 256)));
        let bytes = region.slice_at(256, 4).unwrap();
        assert_eq!(bytes, &[0x00, 0x01, 0x02, 0x03], "0x3000's bytes at offset 256");
        let mut other = Mem::new(0x1000, 0x5000);
        other.pid = Some(42);
        let (known, _) = Known::prepare(&mut other, dll, Some(&mut region));
        assert_eq!((other.reads, known.prefetched_end()), (0, 0));
    }
}
