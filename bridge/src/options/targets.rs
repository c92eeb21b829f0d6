//! The value of `--targets` (gdb's `--inferiors`, `--target`): which of the
//! debugger's targets (lldb) or inferiors (gdb) a command reads, parsed once
//! for both front ends (lldb in Rust, gdb through the C API's
//! `mpiq_parse_targets`), with the same errors.

/// How far past its start one range may end (a typo must not build a huge list).
pub const MAX_RANGE: u32 = 4096;

/// What `--targets` names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TargetSelection {
    /// `all`: every target that has a process.
    All,
    /// These indexes, in the order given, each once.
    Indexes(Vec<u32>),
}

/// Why a `--targets` value is not one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TargetsError {
    /// No value, or only commas.
    #[error("--targets needs a value: 'all' or target numbers N,M and ranges N-M")]
    Empty,
    /// A part that is not a number or a range of numbers.
    #[error("--targets: '{0}' is not a target number; use 'all' or numbers N,M and ranges N-M")]
    NotANumber(String),
    /// A range whose end is below its start (`3-1`).
    #[error("--targets: the range '{0}' ends below its start; write it low-high ({1}-{2})")]
    Backwards(String, u32, u32),
    /// A range whose end is more than [`MAX_RANGE`] past its start.
    #[error("--targets: the range '{0}' is longer than {MAX_RANGE}")]
    TooLong(String),
}

/// Parses a `--targets` value: `all`, or numbers and ranges separated by
/// commas (`0,2`, `1-3`, `0, 4-5`; spaces around each are allowed, empty
/// parts are skipped); an index named twice is kept once, where first named.
pub fn parse_targets(value: &str) -> Result<TargetSelection, TargetsError> {
    if value.trim() == "all" {
        return Ok(TargetSelection::All);
    }
    let mut indexes = Vec::new();
    for part in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let number = |s: &str| {
            s.trim()
                .parse::<u32>()
                .map_err(|_| TargetsError::NotANumber(part.into()))
        };
        let (low, high) = match part.split_once('-') {
            Some((low, high)) => (number(low)?, number(high)?),
            None => (number(part)?, number(part)?),
        };
        if high < low {
            return Err(TargetsError::Backwards(part.into(), high, low));
        }
        if high - low > MAX_RANGE {
            return Err(TargetsError::TooLong(part.into()));
        }
        for index in low..=high {
            if !indexes.contains(&index) {
                indexes.push(index);
            }
        }
    }
    if indexes.is_empty() {
        return Err(TargetsError::Empty);
    }
    Ok(TargetSelection::Indexes(indexes))
}

impl TargetSelection {
    /// As the C API gives it: `all`, or the indexes joined by commas.
    pub fn to_line(&self) -> String {
        match self {
            TargetSelection::All => "all".into(),
            TargetSelection::Indexes(ix) => ix.iter().map(u32::to_string).collect::<Vec<_>>().join(","),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_numbers_lists_and_ranges() {
        assert_eq!(parse_targets("all"), Ok(TargetSelection::All));
        assert_eq!(parse_targets("3"), Ok(TargetSelection::Indexes(vec![3])));
        assert_eq!(parse_targets("0,2,0"), Ok(TargetSelection::Indexes(vec![0, 2])));
        assert_eq!(parse_targets("1-3"), Ok(TargetSelection::Indexes(vec![1, 2, 3])));
        assert_eq!(
            parse_targets(" 4 , 1 - 2,,"),
            Ok(TargetSelection::Indexes(vec![4, 1, 2]))
        );
        assert_eq!(parse_targets("2-2"), Ok(TargetSelection::Indexes(vec![2])));
        assert_eq!(parse_targets("0,2-3").unwrap().to_line(), "0,2,3");
        assert_eq!(parse_targets("all").unwrap().to_line(), "all");
    }

    #[test]
    fn what_is_not_a_selection_says_why() {
        assert_eq!(parse_targets(""), Err(TargetsError::Empty));
        assert_eq!(parse_targets(" , "), Err(TargetsError::Empty));
        assert_eq!(parse_targets("x"), Err(TargetsError::NotANumber("x".into())));
        assert_eq!(parse_targets("1,-2"), Err(TargetsError::NotANumber("-2".into())));
        assert_eq!(parse_targets("1-2-3"), Err(TargetsError::NotANumber("1-2-3".into())));
        assert_eq!(parse_targets("0-5000"), Err(TargetsError::TooLong("0-5000".into())));
        let e = parse_targets("3-1").unwrap_err();
        assert_eq!(e, TargetsError::Backwards("3-1".into(), 1, 3));
        assert_eq!(
            e.to_string(),
            "--targets: the range '3-1' ends below its start; write it low-high (1-3)"
        );
    }
}
