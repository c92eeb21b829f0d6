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
        n => format!("{} and {}", parts[..n - 1].join(", "), parts[n - 1]),
    };
    format!("{} {list}", if one { "rank" } else { "ranks" })
}

/// A tag in words.
pub(crate) fn tag_words(tag: Option<i64>) -> String {
    tag.map_or_else(|| "any tag".to_string(), |t| format!("tag {t}"))
}
