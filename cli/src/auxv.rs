//! The auxiliary vector (`/proc/PID/auxv`, a core file's `NT_AUXV`): pairs
//! of words, a key and its value.

/// Finds `key` in an auxiliary vector (pairs of words).
pub fn auxv_value(data: &[u8], key: u64, word: usize, little: bool) -> Option<u64> {
    data.chunks_exact(2 * word)
        .find_map(|pair| (self::word(pair, 0, word, little)? == key).then(|| self::word(pair, word, word, little))?)
}

/// A word of `size` bytes (1 to 8) at byte `at` of `b`, in the given byte
/// order; `None` past the end.
pub fn word(b: &[u8], at: usize, size: usize, little: bool) -> Option<u64> {
    let s = b.get(at..at + size)?;
    let mut v = [0u8; 8];
    Some(if little {
        v[..size].copy_from_slice(s);
        u64::from_le_bytes(v)
    } else {
        v[8 - size..].copy_from_slice(s);
        u64::from_be_bytes(v)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auxv_lookup() {
        let mut v = Vec::new();
        for (k, val) in [(6u64, 4096u64), (9, 0x1234), (0, 0)] {
            v.extend_from_slice(&k.to_le_bytes());
            v.extend_from_slice(&val.to_le_bytes());
        }
        assert_eq!(auxv_value(&v, 9, 8, true), Some(0x1234));
        assert_eq!(auxv_value(&v, 7, 8, true), None);
    }
}
