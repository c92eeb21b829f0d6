//! A thread's registers: x86_64 in DWARF order, as `PTRACE_GETREGS` or a
//! core file's `NT_PRSTATUS` gives them, and what the unwinder starts from.

/// x86_64 registers by DWARF number (0 rax … 7 rsp, 8–15 r8–r15, 16 the
/// pc); `None` when not recoverable in that frame.
pub type Regs = [Option<u64>; 17];

/// The registers of `PTRACE_GETREGS` in DWARF order.
pub fn regs_from_user(r: &libc::user_regs_struct) -> Regs {
    [
        r.rax, r.rdx, r.rcx, r.rbx, r.rsi, r.rdi, r.rbp, r.rsp, r.r8, r.r9, r.r10, r.r11, r.r12, r.r13, r.r14, r.r15,
        r.rip,
    ]
    .map(Some)
}

/// Why a stopped thread's registers could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegsError {
    /// The thread exited between being stopped and being read.
    #[error("the thread exited while mpiq read it")]
    Exited,
    /// `PTRACE_GETREGS` failed otherwise.
    #[error("PTRACE_GETREGS failed: {0}")]
    GetRegs(nix::errno::Errno),
}

/// The registers of one stopped thread (a live process's, read right after
/// attaching, or a core file's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadRegs {
    /// The thread.
    pub tid: i32,
    /// The registers, or why they could not be read.
    pub regs: Result<Regs, RegsError>,
}
