//! Sets of ranks as ranges: `[[0, 3], [5, 5]]` for JSON, "ranks 0-3 and
//! 5" for people: the merged stacks' words, and the analysis's
//! (`analysis/words.rs` uses these, from the layer above).

/// The ranks as sorted, disjoint, inclusive ranges (duplicates merged).
pub fn rank_ranges(ranks: &[i64]) -> Vec<[i64; 2]> {
    let mut sorted = ranks.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out: Vec<[i64; 2]> = Vec::new();
    for r in sorted {
        match out.last_mut() {
            Some(last) if last[1].checked_add(1) == Some(r) => last[1] = r,
            _ => out.push([r, r]),
        }
    }
    out
}

/// "rank 0", "ranks 1-3", "ranks 0, 2 and 5-9" (two neighbours are
/// listed, "ranks 2 and 3"); an unknown rank (negative) is "?".
pub fn ranks_text(ranks: &[i64]) -> String {
    let ranges = rank_ranges(ranks);
    let mut parts: Vec<String> = Vec::new();
    let mut count = 0usize;
    for [a, b] in ranges {
        if a < 0 {
            // Unknown ranks (-1) only: one "?".
            count += 1;
            if !parts.iter().any(|p| p == "?") {
                parts.push("?".into());
            }
            if b < 0 {
                continue;
            }
        }
        let a = a.max(0);
        count += (b - a + 1) as usize;
        match b - a {
            0 => parts.push(a.to_string()),
            1 => {
                parts.push(a.to_string());
                parts.push(b.to_string());
            }
            _ => parts.push(format!("{a}-{b}")),
        }
    }
    let list = match parts.len() {
        0 => String::new(),
        1 => parts.remove(0),
        n if n > TEXT_PARTS => format!(
            "{}, ... and {} ({count} ranks in all)",
            parts[..TEXT_PARTS - 2].join(", "),
            parts[n - 1]
        ),
        n => format!("{} and {}", parts[..n - 1].join(", "), parts[n - 1]),
    };
    format!("{} {list}", if count == 1 { "rank" } else { "ranks" })
}

/// Most numbers and ranges written out in one list (a group of 100,000
/// ranks scattered over the job reads as its start, its end and its count;
/// the JSON's `ranks` ranges have them all). The analysis writes its rank
/// lists with this function too (`analysis/words.rs`).
const TEXT_PARTS: usize = 12;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_words() {
        assert_eq!(rank_ranges(&[3, 1, 2, 2, 7, 5, 6, 9]), vec![[1, 3], [5, 7], [9, 9]]);
        assert!(rank_ranges(&[]).is_empty());
        assert_eq!(ranks_text(&[0]), "rank 0");
        assert_eq!(ranks_text(&[1, 2, 3]), "ranks 1-3");
        assert_eq!(ranks_text(&[0, 2, 5, 6, 7, 8, 9]), "ranks 0, 2 and 5-9");
        assert_eq!(ranks_text(&[2, 3]), "ranks 2 and 3");
        assert_eq!(ranks_text(&[-1]), "rank ?");
        assert_eq!(ranks_text(&[-1, 0, 1, 2]), "ranks ? and 0-2");
        let blocks: Vec<i64> = (0..100_000).filter(|r| r % 20 < 8).collect();
        assert_eq!(
            ranks_text(&blocks),
            "ranks 0-7, 20-27, 40-47, 60-67, 80-87, 100-107, 120-127, 140-147, 160-167, 180-187, ... and \
             99980-99987 (40000 ranks in all)"
        );
    }
}
