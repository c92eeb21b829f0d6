//! A file mapped into a process, as a core file's `NT_FILE` note lists it.

/// One `NT_FILE` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileEntry {
    /// First address.
    pub start: u64,
    /// One past the last.
    pub end: u64,
    /// File offset of `start`, in bytes.
    pub offset: u64,
    /// The file.
    pub path: String,
}
