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

use super::protocol::{Answer, Query};
use super::sys;
use crate::dump::readahead::{self, ProcessKey, Room};
use crate::target::{Target, TargetError, TypeId, TypeSizes};

/// A lookup, with types by name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Question {
    Symbol(String),
    Function(String),
    Type(String),
    Field(String, String),
    Size(String),
    TypeSizes,
}

/// Most questions remembered per library (the libraries ask about 150).
const MAX_QUESTIONS: usize = 2_000;

/// Questions asked per library path, in the order first asked.
fn learned() -> &'static Mutex<HashMap<PathBuf, Vec<Question>>> {
    static LEARNED: OnceLock<Mutex<HashMap<PathBuf, Vec<Question>>>> = OnceLock::new();
    LEARNED.get_or_init(Default::default)
}

/// Answers computed before the helper starts (part of the start message).
#[derive(Debug, Default, Serialize, Deserialize)]
pub(super) struct Known {
    symbols: Vec<(String, Option<u64>)>,
    functions: Vec<(String, Option<u64>)>,
    types: Vec<(String, Option<u64>)>,
    fields: Vec<(u64, String, Option<u64>)>,
    sizes: Vec<(u64, Option<u64>)>,
    type_sizes: Option<TypeSizes>,
    /// Blocks read ahead: address, length, offset in the shared region.
    #[serde(default)]
    prefetched: Vec<(u64, u64, u64)>,
}

/// What the front end learns during one dump.
pub(super) struct Learner {
    dll: PathBuf,
    process: ProcessKey,
    /// Type id -> the name it was found by, this dump.
    names: HashMap<u64, String>,
    asked: Vec<Question>,
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
        let mut ids: HashMap<String, u64> = HashMap::new();
        for q in questions {
            let r: Result<(), TargetError> = (|| {
                match q {
                    Question::Symbol(n) => {
                        let v = target.find_symbol(&n)?;
                        known.symbols.push((n, v));
                    }
                    Question::Function(n) => {
                        let v = target.find_function(&n)?;
                        known.functions.push((n, v));
                    }
                    Question::Type(n) => {
                        let v = target.find_type(&n)?.map(|t| t.0);
                        if let Some(id) = v {
                            ids.insert(n.clone(), id);
                            learner.names.entry(id).or_insert_with(|| n.clone());
                        }
                        known.types.push((n, v));
                    }
                    Question::Field(t, f) => {
                        if let Some(&id) = ids.get(&t) {
                            let v = target.field_offset(TypeId(id), &f)?;
                            known.fields.push((id, f, v));
                        }
                    }
                    Question::Size(t) => {
                        if let Some(&id) = ids.get(&t) {
                            let v = target.size_of(TypeId(id))?;
                            known.sizes.push((id, v));
                        }
                    }
                    Question::TypeSizes => known.type_sizes = Some(target.type_sizes()?),
                }
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
            symbols: self.symbols.into_iter().collect(),
            functions: self.functions.into_iter().collect(),
            types: self.types.into_iter().collect(),
            fields: self.fields.into_iter().map(|(t, f, v)| ((t, f), v)).collect(),
            sizes: self.sizes.into_iter().collect(),
            type_sizes: self.type_sizes,
            prefetched: self.prefetched.into_iter().map(|(a, l, at)| ((a, l), at)).collect(),
        }
    }
}

impl Learner {
    /// Notes a question the helper asked and the answer it got.
    pub(super) fn observe(&mut self, q: &Query, a: &Answer) {
        let name = |names: &HashMap<u64, String>, ty: &u64| names.get(ty).cloned();
        let question = match q {
            Query::Read { addr, len } => {
                if !matches!(a, Answer::Failed(_)) {
                    self.reads.push((*addr, *len));
                }
                None
            }
            Query::Symbol(n) => Some(Question::Symbol(n.clone())),
            Query::Function(n) => Some(Question::Function(n.clone())),
            Query::Type(n) => {
                if let Answer::Value(Some(id)) = a {
                    self.names.entry(*id).or_insert_with(|| n.clone());
                }
                Some(Question::Type(n.clone()))
            }
            Query::Field { ty, field } => name(&self.names, ty).map(|t| Question::Field(t, field.clone())),
            Query::Size(ty) => name(&self.names, ty).map(Question::Size),
            Query::TypeSizes => Some(Question::TypeSizes),
        };
        // Only questions the target answered: a failure is asked again next
        // time by the helper itself.
        if let (Some(q), false) = (question, matches!(a, Answer::Failed(_))) {
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
    pub symbols: HashMap<String, Option<u64>>,
    pub functions: HashMap<String, Option<u64>>,
    pub types: HashMap<String, Option<u64>>,
    pub fields: HashMap<(u64, String), Option<u64>>,
    pub sizes: HashMap<u64, Option<u64>>,
    pub type_sizes: Option<TypeSizes>,
    /// (address, length) -> offset in the shared region.
    pub prefetched: HashMap<(u64, u64), u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::testkit::Lookups;

    #[test]
    fn questions_of_one_dump_are_answered_afresh_before_the_next() {
        let dll = Path::new("/test/known/libmqs.so");
        let mut first = Lookups::new(4);
        let (known, mut learner) = Known::prepare(&mut first, dll, None);
        assert_eq!(first.asked, 0, "nothing learned yet");
        assert!(known.types.is_empty());
        // What the helper asked during the first dump, and the answers.
        let dialogue = [
            (Query::Symbol("a".into()), Answer::Value(Some(0x10))),
            (
                Query::Symbol("gone".into()),
                Answer::Failed(TargetError::Host("x".into())),
            ),
            (Query::Type("T".into()), Answer::Value(Some(4))),
            (Query::Type("U".into()), Answer::Value(None)),
            (
                Query::Field {
                    ty: 4,
                    field: "x".into(),
                },
                Answer::Value(Some(8)),
            ),
            (Query::Size(4), Answer::Value(Some(24))),
            (Query::TypeSizes, Answer::Sizes(TypeSizes::LP64)),
            (Query::Read { addr: 0, len: 8 }, Answer::Bytes(8)),
        ];
        for (q, a) in &dialogue {
            learner.observe(q, a);
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
        assert_eq!(index.symbols.get("a"), Some(&Some(0x10)));
        assert!(
            !index.symbols.contains_key("gone"),
            "a failure is asked again by the helper"
        );
        assert_eq!(index.types.get("T"), Some(&Some(9)));
        assert_eq!(index.types.get("U"), Some(&None));
        assert_eq!(index.fields.get(&(9, "x".to_string())), Some(&Some(8)));
        assert_eq!(index.sizes.get(&9), Some(&Some(24)));
        assert_eq!(index.type_sizes, Some(TypeSizes::LP64));
        // Another library learns nothing from this one.
        let (known, _) = Known::prepare(&mut second, Path::new("/test/known/other.so"), None);
        assert!(known.index().types.is_empty());
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
            learner.observe(&Query::Read { addr, len: 256 }, &Answer::Shared { at: 0, len: 256 });
        }
        learner.observe(
            &Query::Read { addr: 0x9000, len: 16 },
            &Answer::Failed(TargetError::Host("x".into())),
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
