//! Reading a live process's memory: `process_vm_readv`, falling back to
//! `/proc/PID/mem` (which also reads pages the process itself may not, and
//! works where a seccomp policy forbids `process_vm_readv`).

use std::fs::File;
use std::io::IoSliceMut;
use std::os::unix::fs::FileExt;
use std::sync::OnceLock;

use mpiq::TargetError;
use nix::sys::uio::{process_vm_readv, RemoteIoVec};
use nix::unistd::Pid;

use crate::image::Memory;

/// Memory of a live process.
#[derive(Debug)]
pub struct ProcMemory {
    pid: i32,
    mem: OnceLock<Option<File>>,
}

impl ProcMemory {
    /// Memory of process `pid` (nothing is opened yet).
    pub fn new(pid: i32) -> ProcMemory {
        ProcMemory {
            pid,
            mem: OnceLock::new(),
        }
    }

    fn vm_readv(&self, addr: u64, buf: &mut [u8]) -> usize {
        let Ok(base) = usize::try_from(addr) else {
            return 0;
        };
        let remote = [RemoteIoVec { base, len: buf.len() }];
        let mut local = [IoSliceMut::new(buf)];
        process_vm_readv(Pid::from_raw(self.pid), &mut local, &remote).unwrap_or(0)
    }

    fn proc_mem(&self, addr: u64, buf: &mut [u8]) -> std::io::Result<()> {
        let file = self
            .mem
            .get_or_init(|| File::open(format!("/proc/{}/mem", self.pid)).ok())
            .as_ref()
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::PermissionDenied))?;
        file.read_exact_at(buf, addr)
    }
}

impl Memory for ProcMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        if crate::interrupt::interrupted() {
            return Err(TargetError::Interrupted);
        }
        if buf.is_empty() {
            return Ok(());
        }
        let got = self.vm_readv(addr, buf);
        if got == buf.len() {
            return Ok(());
        }
        let rest = addr.wrapping_add(got as u64);
        self.proc_mem(rest, &mut buf[got..])
            .map_err(|e| TargetError::Unreadable {
                addr,
                len: buf.len() as u64,
                reason: e.to_string(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_memory_and_reports_holes() {
        let data = *b"hello, target";
        let mem = ProcMemory::new(std::process::id() as i32);
        let mut buf = [0u8; 13];
        mem.read(data.as_ptr() as u64, &mut buf).unwrap();
        assert_eq!(&buf, b"hello, target");
        let err = mem.read(8, &mut buf).unwrap_err();
        assert!(
            matches!(err, TargetError::Unreadable { addr: 8, len: 13, .. }),
            "{err:?}"
        );
    }
}
