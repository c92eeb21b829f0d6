//! Ranks and tags in words, for every sentence the analysis writes.

/// Ranks in words: "rank 3", "ranks 0 and 1", "ranks 0-7, 9 and 12".
pub(crate) fn ranks_words(ranks: &[i64]) -> String {
    let mut sorted = ranks.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
            j += 1;
        }
        if j >= i + 2 {
            parts.push(format!("{}-{}", sorted[i], sorted[j]));
        } else {
            parts.extend(sorted[i..=j].iter().map(i64::to_string));
        }
        i = j + 1;
    }
    let one = sorted.len() == 1;
    let list = match parts.len() {
        0 => String::new(),
        1 => parts.remove(0),
        n if n > WORDS_PARTS => format!(
            "{}, ... and {} ({} ranks in all)",
            parts[..WORDS_PARTS - 2].join(", "),
            parts[n - 1],
            sorted.len()
        ),
        n => format!("{} and {}", parts[..n - 1].join(", "), parts[n - 1]),
    };
    format!("{} {list}", if one { "rank" } else { "ranks" })
}

/// Most numbers and ranges written out in one list of ranks (a scattered
/// set of thousands of ranks reads as its start, its end and its count).
const WORDS_PARTS: usize = 12;

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
