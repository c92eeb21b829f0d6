//! Ranks and tags in words, for every sentence the analysis writes.

/// Ranks in words: "rank 3", "ranks 0 and 1", "ranks 0-7, 9 and 12"; a
/// list of more than 12 numbers and ranges as its start, its end and its
/// count. The same words as the merged stacks' (`stacks/ranks.rs`, a lower
/// layer), so that a group of ranks reads alike in every section.
pub(crate) fn ranks_words(ranks: &[i64]) -> String {
    crate::stacks::ranks_text(ranks)
}

/// A tag in words.
pub(crate) fn tag_words(tag: Option<i64>) -> String {
    tag.map_or_else(|| "any tag".to_string(), |t| format!("tag {t}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scattered_set_reads_as_its_ends_and_count() {
        let twelve: Vec<i64> = (0..12).map(|r| r * 2).collect();
        assert_eq!(
            ranks_words(&twelve),
            "ranks 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20 and 22"
        );
        let even: Vec<i64> = (0..5000).map(|r| r * 2).collect();
        assert_eq!(
            ranks_words(&even),
            "ranks 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, ... and 9998 (5000 ranks in all)"
        );
    }
}
