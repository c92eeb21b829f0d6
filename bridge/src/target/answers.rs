//! The one cache of answers to questions by name (symbols, functions,
//! types, fields, sizes), for every front end.
//!
//! A library asks the same hundred-odd questions on every dump, and a host
//! may be slow to answer them (LLDB's `FindTypes` costs more than a whole
//! dump of a thousand operations). The answers stay true as long as the
//! process and the objects loaded in it are the same: the front end says
//! which those are through [`Target::identity`] (lldb: the process and every
//! module's path, UUID, load address and symbol file; gdb: the inferior, its
//! pid and a generation bumped on every objfile event; the CLI: the pid,
//! the process's start time and the mapped files). One rule: answers are
//! kept per identity, for the [`KEPT_TARGETS`] identities used last; a
//! target with no identity keeps nothing between dumps. Failures and
//! interruptions are never kept, and memory is never cached here (the
//! process may run between dumps).
//!
//! Types are cached by name: [`Cached`] gives the library type ids of its
//! own (one per name, per dump) and finds the host's type again by its name
//! only when a question about it is not answered yet.

use std::collections::HashMap;
use std::sync::Mutex;

use super::question::{Answer, Question};
use super::{Target, TargetError, TypeId, TypeSizes};

/// How many targets' answers are kept (the most recently used).
pub const KEPT_TARGETS: usize = 16;

/// The answers about one target, by question, types by name. A type's
/// answer says only whether it exists: its host id was one dump's.
type Answers = HashMap<Question<String>, Answer>;

/// Answers of recent targets, by identity, the most recent last.
static KEPT: Mutex<Vec<(String, Answers)>> = Mutex::new(Vec::new());

fn kept() -> std::sync::MutexGuard<'static, Vec<(String, Answers)>> {
    // A panic while holding the lock cannot leave the list inconsistent.
    KEPT.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Forgets every kept answer (for tests, and for a front end that knows
/// every target changed).
pub fn forget_all() {
    kept().clear();
}

/// A [`Target`] whose questions by name are answered from the cache when
/// they can be, and from `host` (then kept) when not.
pub struct Cached<'t> {
    host: &'t mut dyn Target,
    identity: Option<String>,
    answers: Answers,
    /// This dump's type ids: the name of each.
    names: Vec<String>,
    ids: HashMap<String, TypeId>,
    /// The host's id of each of this dump's ids, once asked (`None`: the
    /// name no longer finds a type).
    host_ids: HashMap<TypeId, Option<TypeId>>,
}

impl<'t> Cached<'t> {
    /// `host`, with the answers kept for its identity.
    pub fn new(host: &'t mut dyn Target) -> Self {
        let identity = host.identity();
        let answers = identity
            .as_ref()
            .and_then(|id| {
                let mut kept = kept();
                let i = kept.iter().position(|(k, _)| k == id)?;
                Some(kept.remove(i).1)
            })
            .unwrap_or_default();
        Cached {
            host,
            identity,
            answers,
            names: Vec::new(),
            ids: HashMap::new(),
            host_ids: HashMap::new(),
        }
    }

    /// This dump's id for the type `name`.
    fn id_of(&mut self, name: &str) -> TypeId {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = TypeId(self.names.len() as u64);
        self.names.push(name.to_string());
        self.ids.insert(name.to_string(), id);
        id
    }

    /// The host's id of one of this dump's type ids, found again by name.
    fn host_id(&mut self, ty: TypeId) -> Result<Option<TypeId>, TargetError> {
        if let Some(&h) = self.host_ids.get(&ty) {
            return Ok(h);
        }
        let Some(name) = self.names.get(ty.0 as usize).cloned() else {
            return Ok(None);
        };
        let h = self.host.find_type(&name)?;
        self.host_ids.insert(ty, h);
        Ok(h)
    }

    fn type_name(&self, ty: TypeId) -> Option<String> {
        self.names.get(ty.0 as usize).cloned()
    }
}

impl Drop for Cached<'_> {
    fn drop(&mut self) {
        let Some(identity) = self.identity.take() else { return };
        let answers = std::mem::take(&mut self.answers);
        let mut kept = kept();
        kept.push((identity, answers));
        if kept.len() > KEPT_TARGETS {
            kept.remove(0);
        }
    }
}

impl Cached<'_> {
    /// The kept answer to `q`, or the host's (kept unless it failed). A
    /// field or size of a type the host no longer finds: none, not kept.
    fn by_name(&mut self, q: Question<String>) -> Result<Answer, TargetError> {
        if let Some(a) = self.answers.get(&q) {
            return Ok(a.clone());
        }
        let asked = q.clone().with_types(|name| match self.ids.get(&name).copied() {
            Some(id) => self.host_id(id),
            None => Ok(None),
        })?;
        let Some(asked) = asked else {
            return Ok(Answer::Value(None));
        };
        let a = asked.ask(self.host)?;
        self.answers.insert(q, a.clone());
        Ok(a)
    }
}

impl super::wrap::Wrapper for Cached<'_> {
    fn inner(&self) -> &dyn Target {
        &*self.host
    }
    fn inner_mut(&mut self) -> &mut dyn Target {
        &mut *self.host
    }
    fn find_symbol(&mut self, name: &str) -> Result<Option<u64>, TargetError> {
        self.by_name(Question::Symbol(name.into()))?.value()
    }
    fn find_function(&mut self, name: &str) -> Result<Option<u64>, TargetError> {
        self.by_name(Question::Function(name.into()))?.value()
    }
    fn find_type(&mut self, name: &str) -> Result<Option<TypeId>, TargetError> {
        let q = Question::Type(name.to_string());
        if let Some(a) = self.answers.get(&q) {
            let found = matches!(a, Answer::Value(Some(_)));
            return Ok(found.then(|| self.id_of(name)));
        }
        let h = self.host.find_type(name)?;
        self.answers.insert(q, Answer::Value(h.map(|h| h.0)));
        Ok(h.map(|h| {
            let id = self.id_of(name);
            self.host_ids.insert(id, Some(h));
            id
        }))
    }
    fn field_offset(&mut self, ty: TypeId, field: &str) -> Result<Option<u64>, TargetError> {
        let Some(name) = self.type_name(ty) else {
            return Ok(None);
        };
        self.by_name(Question::Field {
            ty: name,
            field: field.into(),
        })?
        .value()
    }
    fn size_of(&mut self, ty: TypeId) -> Result<Option<u64>, TargetError> {
        let Some(name) = self.type_name(ty) else {
            return Ok(None);
        };
        self.by_name(Question::Size(name))?.value()
    }
    fn type_sizes(&mut self) -> Result<TypeSizes, TargetError> {
        self.by_name(Question::TypeSizes)?.sizes()
    }
    /// None: nothing above this cache should cache again.
    fn identity(&mut self) -> Option<String> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::testkit::Lookups as Host;

    fn ask_all(t: &mut dyn Target) {
        assert_eq!(t.find_symbol("a").unwrap(), Some(0x10));
        assert!(t.find_symbol("gone").is_err());
        assert_eq!(t.find_function("f").unwrap(), None);
        let ty = t.find_type("T").unwrap().expect("T");
        assert_eq!(t.find_type("U").unwrap(), None);
        assert_eq!(t.field_offset(ty, "x").unwrap(), Some(8));
        assert_eq!(t.size_of(ty).unwrap(), Some(24));
        assert_eq!(t.type_sizes().unwrap(), TypeSizes::LP64);
        let mut b = [0u8; 2];
        t.read_memory(0, &mut b).unwrap();
        assert_eq!(b, [7, 7], "memory is the host's, always");
    }

    /// The cache is one for the process: these tests take turns.
    static TURN: Mutex<()> = Mutex::new(());

    #[test]
    fn answers_are_kept_per_identity_and_only_with_one() {
        let _turn = TURN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let id = Some("answers-test-1".to_string());
        let mut host = Host {
            identity: id.clone(),
            ..Host::new(4)
        };
        ask_all(&mut Cached::new(&mut host));
        assert_eq!(host.asked, 8, "a, gone, f, T, U, T.x, sizeof T, sizes");
        // The next dump of the same identity: only the failure is asked again,
        // and the host's new id of T is found by name for a new question.
        let mut again = Host {
            identity: id,
            ..Host::new(9)
        };
        {
            let mut c = Cached::new(&mut again);
            ask_all(&mut c);
            let ty = c.find_type("T").unwrap().unwrap();
            assert_eq!(c.field_offset(ty, "y").unwrap(), None);
        }
        assert_eq!(again.asked, 3, "gone; then T (by name) and T.y for the new question");
        // Another identity, and none at all, learn nothing from it.
        for identity in [Some("answers-test-2".to_string()), None] {
            let mut other = Host {
                identity,
                ..Host::new(4)
            };
            ask_all(&mut Cached::new(&mut other));
            assert_eq!(other.asked, 8);
        }
        let mut none = Host {
            identity: None,
            ..Host::new(4)
        };
        ask_all(&mut Cached::new(&mut none));
        assert_eq!(none.asked, 8, "no identity: nothing kept between dumps");
    }

    #[test]
    fn only_the_last_identities_are_kept() {
        let _turn = TURN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for i in 0..=KEPT_TARGETS {
            let mut h = Host {
                identity: Some(format!("answers-lru-{i}")),
                ..Host::new(1)
            };
            ask_all(&mut Cached::new(&mut h));
        }
        let mut first = Host {
            identity: Some("answers-lru-0".into()),
            ..Host::new(1)
        };
        ask_all(&mut Cached::new(&mut first));
        assert_eq!(first.asked, 8, "the oldest identity was dropped");
    }
}
