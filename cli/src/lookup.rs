//! `mpiq lookup`: the bridge's lookup diagnostic ([`mpiq::lookup`], the
//! same questions and output as lldb's `mpi lookup`) over a [`Process`],
//! whose strings are read by the symbol's size.

use mpiq::lookup::{Lookup, LookupTarget};
use mpiq::TargetError;

use crate::process::Process;
use crate::run::RunError;

impl<M: crate::image::Memory> LookupTarget for Process<M> {
    /// A symbol the size of a pointer is a `char *` to the text; any other
    /// is the `char[]` that holds it.
    fn string_symbol(&mut self, name: &str) -> Result<Option<String>, TargetError> {
        let Some((addr, size)) = self.image().find_symbol_sized(name) else {
            return Ok(None);
        };
        let ptr = self.image().type_sizes().pointer as u64;
        // `char name[N]` holds the text; `char *name` points to it.
        let at = if size == ptr { self.read_pointer(addr)? } else { addr };
        if at == 0 {
            return Ok(Some(String::new()));
        }
        self.read_c_string(at, 4096).map(Some)
    }

    fn as_target(&mut self) -> &mut dyn mpiq::Target {
        self
    }
}

/// Answers every question, as lines `KIND NAME VALUE` or as JSON.
pub fn run_lookup<T: LookupTarget + ?Sized>(target: &mut T, lookup: &Lookup) -> Result<String, RunError> {
    mpiq::lookup::run(target, lookup).map_err(RunError::Lookup)
}
