//! The questions a debug library asks a target, and their answers, as
//! values: one type for every place that carries, keeps or replays them
//! (the helper's protocol, the answers sent ahead to the helper, the
//! answer cache, recordings, the lookup diagnostic), as gimli's evaluator
//! *asks* for what it needs.
//!
//! A question names a type by a handle of the caller's choice: the host's
//! [`TypeId`] (the default: what a [`Target`] answers, what the helper asks
//! over its socket), or the type's name (`Question<String>`: what stays
//! true from one dump to the next, kept by the known answers and the
//! cache). [`Question::with_types`] turns one into the other.

use serde::{Deserialize, Serialize};

use super::{Target, TargetError, TypeId, TypeSizes};

/// One question to a target, types named by `T`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Question<T = TypeId> {
    /// `len` bytes of memory at `addr` ([`Target::read_memory`]).
    Read {
        /// Where.
        addr: u64,
        /// How many bytes.
        len: u64,
    },
    /// The address of a data symbol ([`Target::find_symbol`]).
    Symbol(String),
    /// The address of a function ([`Target::find_function`]).
    Function(String),
    /// A type by name ([`Target::find_type`]).
    Type(String),
    /// The offset of a field of a type ([`Target::field_offset`]).
    Field {
        /// The type.
        ty: T,
        /// The field.
        field: String,
    },
    /// `sizeof` a type ([`Target::size_of`]).
    Size(T),
    /// The sizes of the basic C types ([`Target::type_sizes`]).
    TypeSizes,
}

/// A target's answer to a [`Question`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Answer {
    /// The bytes of a read.
    Bytes(Vec<u8>),
    /// An address, a type's id, an offset or a size; `None`: no such
    /// symbol, function, type or field, or a type with no size.
    Value(Option<u64>),
    /// The basic type sizes.
    Sizes(TypeSizes),
}

impl<T> Question<T> {
    /// The same question with its type named by `f`'s handle; `Ok(None)`
    /// when `f` finds no such type (the question has no answer then).
    pub fn with_types<U, E>(self, mut f: impl FnMut(T) -> Result<Option<U>, E>) -> Result<Option<Question<U>>, E> {
        Ok(Some(match self {
            Question::Read { addr, len } => Question::Read { addr, len },
            Question::Symbol(n) => Question::Symbol(n),
            Question::Function(n) => Question::Function(n),
            Question::Type(n) => Question::Type(n),
            Question::Field { ty, field } => match f(ty)? {
                Some(ty) => Question::Field { ty, field },
                None => return Ok(None),
            },
            Question::Size(ty) => match f(ty)? {
                Some(ty) => Question::Size(ty),
                None => return Ok(None),
            },
            Question::TypeSizes => Question::TypeSizes,
        }))
    }
}

impl Question {
    /// Asks `target`: the one place a question becomes a call.
    pub fn ask(&self, target: &mut dyn Target) -> Result<Answer, TargetError> {
        Ok(match self {
            &Question::Read { addr, len } => {
                let n = usize::try_from(len).map_err(|_| TargetError::Host("read too large".into()))?;
                let mut buf = vec![0u8; n];
                target.read_memory(addr, &mut buf)?;
                Answer::Bytes(buf)
            }
            Question::Symbol(n) => Answer::Value(target.find_symbol(n)?),
            Question::Function(n) => Answer::Value(target.find_function(n)?),
            Question::Type(n) => Answer::Value(target.find_type(n)?.map(|t| t.0)),
            Question::Field { ty, field } => Answer::Value(target.field_offset(*ty, field)?),
            Question::Size(ty) => Answer::Value(target.size_of(*ty)?),
            Question::TypeSizes => Answer::Sizes(target.type_sizes()?),
        })
    }
}

impl Answer {
    /// The value of a lookup; another answer is the host's mistake.
    pub fn value(self) -> Result<Option<u64>, TargetError> {
        match self {
            Answer::Value(v) => Ok(v),
            other => Err(unexpected(&other)),
        }
    }

    /// The basic type sizes; another answer is the host's mistake.
    pub fn sizes(self) -> Result<TypeSizes, TargetError> {
        match self {
            Answer::Sizes(s) => Ok(s),
            other => Err(unexpected(&other)),
        }
    }
}

fn unexpected(a: &Answer) -> TargetError {
    TargetError::Host(format!("unexpected answer {a:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::Lookups;

    #[test]
    fn questions_are_asked_once_and_travel_by_name_or_by_id() {
        let mut host = Lookups::new(4);
        let t: &mut dyn Target = &mut host;
        assert_eq!(Question::Symbol("a".into()).ask(t).unwrap(), Answer::Value(Some(0x10)));
        assert_eq!(Question::Type("T".into()).ask(t).unwrap(), Answer::Value(Some(4)));
        let by_name: Question<String> = Question::Field {
            ty: "T".into(),
            field: "x".into(),
        };
        let by_id = by_name
            .clone()
            .with_types(|n| Ok::<_, TargetError>((n == "T").then_some(TypeId(4))))
            .unwrap()
            .unwrap();
        assert_eq!(by_id.ask(t).unwrap().value().unwrap(), Some(8));
        let unknown: Question<String> = Question::Size("U".into());
        assert_eq!(
            unknown.with_types(|_| Ok::<Option<TypeId>, TargetError>(None)),
            Ok(None)
        );
        assert_eq!(Question::TypeSizes.ask(t).unwrap().sizes().unwrap(), TypeSizes::LP64);
        assert!(Answer::Value(None).sizes().is_err());
        // The id is the host's number on the wire.
        assert_eq!(
            serde_json::to_string(&Question::Size(TypeId(9))).unwrap(),
            r#"{"Size":9}"#
        );
    }
}
