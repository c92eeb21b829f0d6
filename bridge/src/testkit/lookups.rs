//! A target that answers questions by name, for the tests of what keeps
//! and re-asks them (the answer cache, the helper's answers sent ahead).

use crate::target::{ByteOrder, ProcessDescription, Target, TargetError, TypeId, TypeSizes};

/// Answers lookups and counts them: the symbol "a" is at 0x10, "gone"
/// fails, other symbols and every function are missing; the type "T" has
/// the id `t`, with the field "x" at 8 and size 24; memory reads give 7s
/// and are counted in `reads`.
#[derive(Debug, Default)]
pub struct Lookups {
    /// What [`Target::identity`] says.
    pub identity: Option<String>,
    /// The id of type "T".
    pub t: u64,
    /// Questions by name asked.
    pub asked: usize,
    /// Memory reads asked.
    pub reads: usize,
}

impl Lookups {
    /// No identity, "T" with the id `t`.
    pub fn new(t: u64) -> Self {
        Lookups {
            t,
            ..Lookups::default()
        }
    }
}

impl Target for Lookups {
    fn describe(&self) -> ProcessDescription {
        ProcessDescription::default()
    }
    fn read_memory(&mut self, _: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        self.reads += 1;
        buf.fill(7);
        Ok(())
    }
    fn find_symbol(&mut self, n: &str) -> Result<Option<u64>, TargetError> {
        self.asked += 1;
        match n {
            "a" => Ok(Some(0x10)),
            "gone" => Err(TargetError::Host("cannot say".into())),
            _ => Ok(None),
        }
    }
    fn find_function(&mut self, _: &str) -> Result<Option<u64>, TargetError> {
        self.asked += 1;
        Ok(None)
    }
    fn find_type(&mut self, n: &str) -> Result<Option<TypeId>, TargetError> {
        self.asked += 1;
        Ok((n == "T").then_some(TypeId(self.t)))
    }
    fn field_offset(&mut self, ty: TypeId, f: &str) -> Result<Option<u64>, TargetError> {
        self.asked += 1;
        assert_eq!(ty.0, self.t, "fields are asked with this target's own type id");
        Ok((f == "x").then_some(8))
    }
    fn size_of(&mut self, ty: TypeId) -> Result<Option<u64>, TargetError> {
        self.asked += 1;
        assert_eq!(ty.0, self.t, "sizes are asked with this target's own type id");
        Ok(Some(24))
    }
    fn type_sizes(&mut self) -> Result<TypeSizes, TargetError> {
        self.asked += 1;
        Ok(TypeSizes::LP64)
    }
    fn byte_order(&mut self) -> ByteOrder {
        ByteOrder::Little
    }
    fn identity(&mut self) -> Option<String> {
        self.identity.clone()
    }
}
