//! [`Wrapper`]: a [`Target`] that wraps another and passes on every
//! question it does not answer itself, written once.
//!
//! A wrapper (the read-ahead of a dump, the answer cache, the recorder, the
//! test kit's fault injector) implements [`Wrapper`]: it names its inner
//! target and overrides only what it changes; every other [`Target`]
//! method is passed on by the provided methods here. A method added to
//! [`Target`] is added here once, and every wrapper passes it on.
//!
//! Callers use the wrapper through [`Target`] (the blanket impl below); a
//! wrapper's module names this trait by its path (`wrap::Wrapper`), not by
//! a `use` of it, so that a method call on a wrapper finds one method.

use crate::snapshot::model::{PythonStacks, ThreadStack};

use super::{ByteOrder, HeldBytes, ProcessDescription, Target, TargetError, TypeId, TypeSizes};

/// A [`Target`] around an inner one: each provided method passes the
/// question on to [`Wrapper::inner_mut`] (or [`Wrapper::inner`]).
pub trait Wrapper {
    /// The target this one wraps.
    fn inner(&self) -> &dyn Target;
    /// The same, to ask.
    fn inner_mut(&mut self) -> &mut dyn Target;

    /// [`Target::describe`].
    fn describe(&self) -> ProcessDescription {
        self.inner().describe()
    }
    /// [`Target::read_memory`].
    fn read_memory(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        self.inner_mut().read_memory(addr, buf)
    }
    /// [`Target::held_memory`].
    fn held_memory(&mut self, addr: u64, len: usize) -> Option<HeldBytes> {
        self.inner_mut().held_memory(addr, len)
    }
    /// [`Target::find_symbol`].
    fn find_symbol(&mut self, name: &str) -> Result<Option<u64>, TargetError> {
        self.inner_mut().find_symbol(name)
    }
    /// [`Target::find_function`].
    fn find_function(&mut self, name: &str) -> Result<Option<u64>, TargetError> {
        self.inner_mut().find_function(name)
    }
    /// [`Target::find_type`].
    fn find_type(&mut self, name: &str) -> Result<Option<TypeId>, TargetError> {
        self.inner_mut().find_type(name)
    }
    /// [`Target::field_offset`].
    fn field_offset(&mut self, ty: TypeId, field: &str) -> Result<Option<u64>, TargetError> {
        self.inner_mut().field_offset(ty, field)
    }
    /// [`Target::size_of`].
    fn size_of(&mut self, ty: TypeId) -> Result<Option<u64>, TargetError> {
        self.inner_mut().size_of(ty)
    }
    /// [`Target::type_sizes`].
    fn type_sizes(&mut self) -> Result<TypeSizes, TargetError> {
        self.inner_mut().type_sizes()
    }
    /// [`Target::byte_order`].
    fn byte_order(&mut self) -> ByteOrder {
        self.inner_mut().byte_order()
    }
    /// [`Target::world_rank`].
    fn world_rank(&mut self) -> Option<i32> {
        self.inner_mut().world_rank()
    }
    /// [`Target::identity`].
    fn identity(&mut self) -> Option<String> {
        self.inner_mut().identity()
    }
    /// [`Target::stacks`].
    fn stacks(&mut self) -> Result<Option<Vec<ThreadStack>>, TargetError> {
        self.inner_mut().stacks()
    }
    /// [`Target::frame_value`].
    fn frame_value(&mut self, thread: u64, frame: u32, name: &str) -> Result<Option<u64>, TargetError> {
        self.inner_mut().frame_value(thread, frame, name)
    }
    /// [`Target::python_stacks`].
    fn python_stacks(&mut self) -> Result<Option<PythonStacks>, TargetError> {
        self.inner_mut().python_stacks()
    }
}

impl<W: Wrapper> Target for W {
    fn describe(&self) -> ProcessDescription {
        Wrapper::describe(self)
    }
    fn read_memory(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        Wrapper::read_memory(self, addr, buf)
    }
    fn held_memory(&mut self, addr: u64, len: usize) -> Option<HeldBytes> {
        Wrapper::held_memory(self, addr, len)
    }
    fn find_symbol(&mut self, name: &str) -> Result<Option<u64>, TargetError> {
        Wrapper::find_symbol(self, name)
    }
    fn find_function(&mut self, name: &str) -> Result<Option<u64>, TargetError> {
        Wrapper::find_function(self, name)
    }
    fn find_type(&mut self, name: &str) -> Result<Option<TypeId>, TargetError> {
        Wrapper::find_type(self, name)
    }
    fn field_offset(&mut self, ty: TypeId, field: &str) -> Result<Option<u64>, TargetError> {
        Wrapper::field_offset(self, ty, field)
    }
    fn size_of(&mut self, ty: TypeId) -> Result<Option<u64>, TargetError> {
        Wrapper::size_of(self, ty)
    }
    fn type_sizes(&mut self) -> Result<TypeSizes, TargetError> {
        Wrapper::type_sizes(self)
    }
    fn byte_order(&mut self) -> ByteOrder {
        Wrapper::byte_order(self)
    }
    fn world_rank(&mut self) -> Option<i32> {
        Wrapper::world_rank(self)
    }
    fn identity(&mut self) -> Option<String> {
        Wrapper::identity(self)
    }
    fn stacks(&mut self) -> Result<Option<Vec<ThreadStack>>, TargetError> {
        Wrapper::stacks(self)
    }
    fn frame_value(&mut self, thread: u64, frame: u32, name: &str) -> Result<Option<u64>, TargetError> {
        Wrapper::frame_value(self, thread, frame, name)
    }
    fn python_stacks(&mut self) -> Result<Option<PythonStacks>, TargetError> {
        Wrapper::python_stacks(self)
    }
}

#[cfg(test)]
mod tests {
    /// The names of the methods declared in the block of `src` that starts
    /// with `header` (up to its closing brace at the start of a line).
    fn methods(src: &str, header: &str) -> Vec<String> {
        let start = src.find(header).unwrap_or_else(|| panic!("{header} not found"));
        let body = &src[start..];
        let body = &body[..body.find("\n}\n").expect("end of block")];
        let mut names: Vec<String> = body
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix("fn "))
            .map(|l| l[..l.find(['(', '<']).expect("a signature")].to_string())
            .collect();
        names.sort();
        names
    }

    /// Every method of `Target` is passed on by `Wrapper` and by the
    /// blanket impl: a method added to `Target` and not here fails this.
    #[test]
    fn every_target_method_is_passed_on() {
        let target = methods(include_str!("mod.rs"), "pub trait Target {");
        assert_eq!(target.len(), 15, "{target:?}");
        let this = include_str!("wrap.rs");
        let mut wrapper = methods(this, "pub trait Wrapper {");
        wrapper.retain(|m| m != "inner" && m != "inner_mut");
        assert_eq!(wrapper, target, "Wrapper's provided methods");
        assert_eq!(
            methods(this, "impl<W: Wrapper> Target for W {"),
            target,
            "the blanket impl"
        );
    }
}
