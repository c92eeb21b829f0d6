//! Why a step of the unwinder failed: one enum for the layer, whose text
//! becomes a stack's note or a warning, where a person reads it.

use std::path::PathBuf;

use mpiq::TargetError;

/// Why an object's unwind information could not be read, or a step from a
/// frame to its caller could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UnwindError {
    /// The object's file could not be parsed.
    #[error("{}: {source}", path.display())]
    Parse {
        /// The object.
        path: PathBuf,
        /// Why.
        source: object::Error,
    },
    /// `.eh_frame` could not be read at a link-time address.
    #[error(".eh_frame at {svma:#x}: {source}")]
    EhFrame {
        /// The address looked up.
        svma: u64,
        /// Why.
        source: gimli::Error,
    },
    /// `.debug_frame` could not be read at a link-time address.
    #[error(".debug_frame at {svma:#x}: {source}")]
    DebugFrame {
        /// The address looked up.
        svma: u64,
        /// Why.
        source: gimli::Error,
    },
    /// A CFI expression could not be read or evaluated.
    #[error("CFI expression: {0}")]
    Expression(#[source] gimli::Error),
    /// A CFI expression without the section it was read from.
    #[error("expression without its section")]
    NoSection,
    /// A CFI expression's value is not an address.
    #[error("{0}")]
    Value(#[source] gimli::Error),
    /// A CFI expression ended without an address.
    #[error("CFI expression gave no address")]
    NoAddress,
    /// A CFI expression needs a register not known in this frame.
    #[error("CFI expression needs an unknown register")]
    UnknownRegister,
    /// A CFI expression read memory that is not readable.
    #[error("{0}")]
    Memory(#[from] TargetError),
    /// The CFA's own rule asked for the CFA.
    #[error("CFA inside its own rule")]
    CfaInOwnRule,
    /// A CFI expression asked for what the unwinder does not give (gimli's
    /// request, as it prints it).
    #[error("CFI expression needs {0}")]
    Unsupported(String),
    /// A CFI expression took more than its steps.
    #[error("CFI expression too long")]
    TooLong,
    /// The register the CFA is computed from is not known in this frame.
    #[error("the CFA's register {0} is not known")]
    CfaRegister(u16),
    /// The return address saved on the stack is unreadable.
    #[error("the return address at {at:#x} (CFA {cfa:#x}) is unreadable")]
    ReturnAddress {
        /// Where it was saved.
        at: u64,
        /// The frame's CFA.
        cfa: u64,
    },
    /// A word of the stack (a saved frame pointer or return address) is
    /// unreadable.
    #[error("stack word at {addr:#x} unreadable: {source}")]
    StackWord {
        /// Its address.
        addr: u64,
        /// Why.
        source: TargetError,
    },
    /// No frame pointer (or stack pointer) is known.
    #[error("no frame pointer to follow")]
    NoFramePointer,
    /// The frame pointer does not point into the stack above the stack
    /// pointer.
    #[error("frame pointer {0:#x} does not point into the stack")]
    BadFramePointer(u64),
    /// The object index is not one of the process's objects.
    #[error("no such object")]
    NoSuchObject,
}
