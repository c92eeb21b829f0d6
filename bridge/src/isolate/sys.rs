//! Every libc call of the isolation layer, behind safe functions: the
//! shared region (below), passing its descriptor, polling, and setting up
//! the helper process.
//!
//! A memory region the front end shares with `mpiq-dllhost`: the bytes of
//! memory reads go through it instead of the socket, and so do the records
//! of the result's operations. A 256 KiB read over the socket took about
//! 230 us (several socket buffers, a copy on each side); through the region
//! it is one copy into the helper's page cache.
//!
//! The protocol keeps the two sides apart in time: the front end writes the
//! region only while it answers a question, and the helper, which is
//! waiting for that answer, copies out of it only after the answer arrived;
//! the helper writes the result's records only after its last question,
//! and the front end reads them only after the result's line arrived.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use crate::target::HeldRegion;

/// Standard input's descriptor (the helper's end of the socket).
pub(super) const STDIN: RawFd = libc::STDIN_FILENO;

/// Whether `fd` is readable within `timeout_ms` (0: now, without sleeping).
pub(super) fn poll_readable(fd: RawFd, timeout_ms: i32) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: pfd is a valid pollfd for one descriptor.
    let rc = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(rc > 0)
}

/// Gives the CPU to another thread or process (the other side, if it
/// shares the CPU).
pub(super) fn yield_cpu() {
    // SAFETY: sched_yield has no arguments and cannot fail in a way that matters.
    unsafe { libc::sched_yield() };
}

/// The file of the object (executable or shared library) holding this code.
pub(super) fn this_object() -> Option<PathBuf> {
    // SAFETY: an all-zero Dl_info is valid (NULL pointers).
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the address, a function of this object, and
    // fills `info`.
    let ok = unsafe { libc::dladdr(this_object as *const libc::c_void, &mut info) };
    if ok == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dli_fname is a NUL-terminated path owned by the loader.
    let name = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
    let path = PathBuf::from(std::ffi::OsStr::from_bytes(name.to_bytes()));
    std::fs::canonicalize(&path).ok().or(Some(path))
}

/// Makes this process die with SIGKILL when its parent (the front end)
/// dies: a library looping on corrupt data out of the helper's cache would
/// never notice.
pub(super) fn die_with_parent() {
    // SAFETY: prctl(PR_SET_PDEATHSIG) only sets a flag of this process.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) };
}

/// Closes every descriptor but standard input, output and error. Whatever
/// else the front end's process had open without close-on-exec (a
/// debugger's pipes and terminals) must not live as long as this helper,
/// which is kept between dumps: a reader waiting for the end of such a pipe
/// would wait for the whole debugger session (gdb's `pipe` command did).
pub(super) fn close_inherited() {
    // SAFETY: closes descriptors 3 and up of this process, which owns
    // none of them yet (nothing was opened before main's first lines).
    if unsafe { libc::close_range(3, libc::c_uint::MAX, 0) } == 0 {
        return;
    }
    // Kernels before 5.9: one at a time.
    let open: Vec<i32> = std::fs::read_dir("/proc/self/fd")
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .filter(|&fd| fd > 2)
                .collect()
        })
        .unwrap_or_default();
    for fd in open {
        // SAFETY: as above (the directory's own descriptor is closed
        // already: it fails harmlessly).
        unsafe { libc::close(fd) };
    }
}

/// The helper's standard error, taken into a memfd while the library runs
/// a dump: what a debug library prints there (Open MPI's "WARNING: ... is
/// unable to find debugging information about the ... type", once per
/// rank) goes back with the dump as a note, instead of onto the user's
/// terminal (or over `mpiq watch`'s screen). A memfd never fills, so the
/// library never blocks on it. Dropped, standard error is the helper's own
/// again.
pub(super) struct StderrCapture {
    memfd: OwnedFd,
    original: OwnedFd,
}

impl StderrCapture {
    /// At most this much of what the library printed is kept per dump.
    const MAX: usize = 64 << 10;

    /// Points standard error at a new memfd.
    pub(super) fn start() -> io::Result<StderrCapture> {
        // SAFETY: memfd_create takes a NUL-terminated name and flags.
        let raw = unsafe { libc::memfd_create(c"mpiq-dllhost-stderr".as_ptr(), libc::MFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a descriptor just created, owned by nothing else.
        let memfd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: duplicates standard error, open in every process started
        // by the front end, to a new close-on-exec descriptor.
        let saved = unsafe { libc::fcntl(2, libc::F_DUPFD_CLOEXEC, 3) };
        if saved < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a descriptor just created, owned by nothing else.
        let original = unsafe { OwnedFd::from_raw_fd(saved) };
        // SAFETY: both descriptors are open; descriptor 2 now shares the
        // memfd's open file (and its offset).
        if unsafe { libc::dup2(memfd.as_raw_fd(), 2) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(StderrCapture { memfd, original })
    }

    /// What was printed since the start or the last call (at most
    /// [`Self::MAX`] bytes), and the memfd emptied.
    pub(super) fn take(&self) -> Vec<u8> {
        let mut buf = vec![0u8; Self::MAX];
        // SAFETY: reads at most MAX bytes into `buf`, which holds MAX.
        let n = unsafe { libc::pread(self.memfd.as_raw_fd(), buf.as_mut_ptr().cast(), Self::MAX, 0) };
        buf.truncate(usize::try_from(n).unwrap_or(0));
        // SAFETY: truncating and rewinding this process's own memfd (the
        // offset is shared with descriptor 2, which it rewinds too).
        unsafe {
            libc::ftruncate(self.memfd.as_raw_fd(), 0);
            libc::lseek(2, 0, libc::SEEK_SET);
        }
        buf
    }
}

impl Drop for StderrCapture {
    fn drop(&mut self) {
        // SAFETY: both descriptors are open; standard error becomes the
        // one the helper was started with.
        unsafe { libc::dup2(self.original.as_raw_fd(), 2) };
    }
}

/// Size of the region: the largest read or result that goes through it
/// (larger ones travel over the socket). Only pages written take memory.
pub(super) const SIZE: usize = 64 << 20;

/// The front end's side: a writable shared mapping of a memfd.
pub(super) struct Region {
    fd: OwnedFd,
    ptr: *mut u8,
    len: usize,
}

impl Region {
    /// Creates the region (close-on-exec: only the helper gets it, through
    /// [`send_fd`]).
    pub(super) fn create(len: usize) -> io::Result<Region> {
        // SAFETY: memfd_create takes a NUL-terminated name and flags.
        let raw = unsafe { libc::memfd_create(c"mpiq-reads".as_ptr(), libc::MFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let size = libc::off_t::try_from(len).map_err(io::Error::other)?;
        // SAFETY: ftruncate on a descriptor we own.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), size) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let ptr = map(&fd, len)?;
        Ok(Region { fd, ptr, len })
    }

    /// The first `n` bytes, to read target memory into (`None` if the
    /// region is smaller).
    pub(super) fn slice(&mut self, n: usize) -> Option<&mut [u8]> {
        self.slice_at(0, n)
    }

    /// `n` bytes at `at` (`None` if they are not all in the region).
    pub(super) fn slice_at(&mut self, at: usize, n: usize) -> Option<&mut [u8]> {
        if at.checked_add(n).is_none_or(|end| end > self.len) {
            return None;
        }
        // SAFETY: `at + n <= len` bytes of the mapping, readable and
        // writable, alive as long as `self`; the protocol has the helper
        // touch it only while this process waits for it, and the slice is
        // borrowed from `&mut self`, so it ends before this process waits
        // again.
        Some(unsafe { std::slice::from_raw_parts_mut(self.ptr.add(at), n) })
    }

    /// The descriptor, for [`send_fd`].
    pub(super) fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

// SAFETY: a Region owns its mapping and descriptor outright; nothing in it
// is tied to the thread that made it (the helper of a kept dump may be used
// by the next dump's thread).
unsafe impl Send for Region {}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `create`; no slice of
        // it outlives `self`.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// Maps `len` bytes of the memfd `fd`, shared, readable and writable.
fn map(fd: &OwnedFd, len: usize) -> io::Result<*mut u8> {
    // SAFETY: a new shared mapping of a memfd we hold; the kernel picks the
    // address and checks the descriptor and the size.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(ptr.cast())
}

/// The buffer of a one-byte message: `byte` (it must outlive the iovec).
fn one_byte(byte: &mut [u8; 1]) -> libc::iovec {
    libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    }
}

/// A message of `iov` (which must outlive it), without control data yet;
/// `[u64; 4]` of it hold one descriptor, aligned as cmsghdr needs.
fn message(iov: &mut libc::iovec) -> libc::msghdr {
    // SAFETY: an all-zero msghdr is valid (no name, no control).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    msg
}

/// The marker byte before the start message: a region comes with it.
const WITH_REGION: u8 = b'R';
/// The marker byte before the start message: no region.
const WITHOUT_REGION: u8 = b'N';

/// Sends the region's descriptor (or, without a region, nothing) with one
/// marker byte over `sock` (`SCM_RIGHTS`): the helper's first read. Passing
/// it at spawn instead would need a `pre_exec` hook, and std then forks
/// (copying the page tables of a large debugger: 2.5 ms) where it otherwise
/// uses `posix_spawn`.
pub(super) fn send_fd(sock: RawFd, fd: Option<RawFd>) -> io::Result<()> {
    let mut byte = [if fd.is_some() { WITH_REGION } else { WITHOUT_REGION }];
    let mut iov = one_byte(&mut byte);
    let mut control = [0u64; 4];
    let mut msg = message(&mut iov);
    if let Some(fd) = fd {
        msg.msg_control = control.as_mut_ptr().cast();
        // SAFETY: CMSG_SPACE only computes a size.
        msg.msg_controllen = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
        // SAFETY: msg_control points to `control`, large and aligned enough
        // for one cmsghdr carrying one descriptor (CMSG_SPACE above), so the
        // first header and its data are inside it.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as usize;
            std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>(), fd);
        }
    }
    // SAFETY: msg points to live buffers (iov, control) for the call.
    let n = unsafe { libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) };
    if n == 1 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The helper's side of [`send_fd`]: reads the marker byte from `sock` and
/// the descriptor that comes with it, if any.
pub(super) fn receive_fd(sock: RawFd) -> io::Result<Option<OwnedFd>> {
    let mut byte = [0u8; 1];
    let mut iov = one_byte(&mut byte);
    let mut control = [0u64; 4];
    let mut msg = message(&mut iov);
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control);
    // SAFETY: msg points to live buffers for the call; MSG_CMSG_CLOEXEC
    // keeps the descriptor from leaking into anything the library starts.
    let n = unsafe { libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n != 1 {
        return Err(if n < 0 {
            io::Error::last_os_error()
        } else {
            io::Error::other("mpiq sent nothing")
        });
    }
    if byte[0] != WITH_REGION && byte[0] != WITHOUT_REGION {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "mpiq speaks another version of the helper protocol: this mpiq-dllhost is from another build \
             of mpiq (install both from one build)",
        ));
    }
    // SAFETY: the kernel filled msg_control with `msg_controllen` bytes of
    // control messages; CMSG_FIRSTHDR/CMSG_DATA stay inside them, and an
    // SCM_RIGHTS message carries a descriptor now owned by this process.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if byte[0] == WITH_REGION
            && !cmsg.is_null()
            && (*cmsg).cmsg_level == libc::SOL_SOCKET
            && (*cmsg).cmsg_type == libc::SCM_RIGHTS
        {
            let fd = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>());
            return Ok(Some(OwnedFd::from_raw_fd(fd)));
        }
    }
    Ok(None)
}

/// The helper's side: a mapping of the region.
pub(super) struct View {
    ptr: *mut u8,
    len: usize,
}

impl View {
    /// Maps the region the front end sent (the descriptor is closed after;
    /// the mapping stays).
    pub(super) fn open(fd: OwnedFd, len: usize) -> io::Result<View> {
        let ptr = map(&fd, len)?;
        Ok(View { ptr, len })
    }

    /// Size of the region.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Copies `bytes` into the region at `at` (for the front end to read
    /// after this process's next message); false if they do not fit.
    pub(super) fn write_at(&self, at: usize, bytes: &[u8]) -> bool {
        if at.checked_add(bytes.len()).is_none_or(|end| end > self.len) {
            return false;
        }
        // SAFETY: `at + bytes.len() <= len` bytes of the mapping, alive for
        // the life of `self`; a raw copy (no reference to the shared bytes
        // is formed), while the front end waits for this process.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr.add(at), bytes.len()) };
        true
    }

    /// Copies `buf.len()` bytes of the region from `at` into `buf`; false
    /// if they are not all in the region.
    pub(super) fn copy_to(&self, at: usize, buf: &mut [u8]) -> bool {
        if at.checked_add(buf.len()).is_none_or(|end| end > self.len) {
            return false;
        }
        // SAFETY: the mapping holds the `at..at + buf.len()` bytes, readable
        // for the life of `self`; a raw copy (no reference to the shared
        // bytes is formed), done after the front end finished writing them.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(at), buf.as_mut_ptr(), buf.len()) };
        true
    }
}

// SAFETY: a View owns its mapping outright; nothing in it is tied to the
// thread that made it, and it is only read through shared references
// (writes are raw copies, ordered by the protocol).
unsafe impl Send for View {}
// SAFETY: as above.
unsafe impl Sync for View {}

impl HeldRegion for View {
    fn bytes(&self) -> &[u8] {
        // SAFETY: the whole mapping, readable for the life of `self`. The
        // front end writes the parts lent out as `HeldBytes` only before the
        // dump that reads them starts (see `Remote::held_memory`).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for View {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `open`.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::net::UnixStream;

    #[test]
    fn a_region_sent_over_a_socket_shows_what_was_written() {
        let (a, b) = UnixStream::pair().unwrap();
        let mut region = Region::create(SIZE).unwrap();
        send_fd(a.as_raw_fd(), Some(region.raw_fd())).unwrap();
        let fd = receive_fd(b.as_raw_fd()).unwrap().expect("a descriptor");
        let view = View::open(fd, SIZE).unwrap();
        region.slice(5).unwrap().copy_from_slice(b"hello");
        let mut got = [0u8; 5];
        assert!(view.copy_to(0, &mut got));
        assert_eq!(&got, b"hello");
        // Larger than the region: refused on both sides.
        assert!(region.slice(SIZE + 1).is_none());
        assert!(!view.copy_to(0, &mut vec![0u8; SIZE + 1]));
        assert!(!view.copy_to(SIZE - 2, &mut got));
        assert!(region.slice_at(SIZE - 2, 5).is_none());
    }

    #[test]
    fn no_region_and_a_stranger_are_told_apart() {
        let (a, b) = UnixStream::pair().unwrap();
        send_fd(a.as_raw_fd(), None).unwrap();
        assert!(receive_fd(b.as_raw_fd()).unwrap().is_none());
        // A front end of another build starts with its start message.
        (&a).write_all(b"{\"dll\":\"x\"}\n").unwrap();
        let e = receive_fd(b.as_raw_fd()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("another build"), "{e}");
    }
}
