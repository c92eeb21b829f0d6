//! What `--detect`'s checks cost the job: how long each held the job's
//! ranks on this node stopped ([`crate::ptrace::take_stopped`]). The ranks
//! of one check are stopped together, so a job whose ranks wait on one
//! another loses about the longest stop of each check.

use std::collections::HashMap;
use std::time::Duration;

/// The stops of every check so far.
#[derive(Debug, Default)]
pub struct DetectCost {
    /// Per check, the longest any rank of this node was held stopped
    /// (both samples of the check together).
    longest: Vec<Duration>,
}

impl DetectCost {
    /// Adds one check: pid → how long it was held stopped.
    pub fn add_check(&mut self, stopped: &HashMap<i32, Duration>) {
        self.longest.push(stopped.values().copied().max().unwrap_or_default());
    }

    /// The stops of the last check, for a note: "ranks stopped 0.12 s".
    pub fn last(&self) -> Option<Duration> {
        self.longest.last().copied()
    }

    /// In words, against the run's wall time: "3 checks held the ranks
    /// stopped for 0.41 s in all (the longest 0.15 s, typically 0.13 s):
    /// 0.2 % of the 3 min 5 s run". `None` before the first check.
    pub fn words(&self, ran: Duration) -> Option<String> {
        let n = self.longest.len();
        if n == 0 {
            return None;
        }
        let total: Duration = self.longest.iter().sum();
        let mut sorted = self.longest.clone();
        sorted.sort_unstable();
        let longest = sorted[n - 1];
        let typical = sorted[n / 2];
        let share = 100.0 * total.as_secs_f64() / ran.as_secs_f64().max(1e-3);
        Some(format!(
            "--detect's {n} check{} held the ranks on this node stopped for {:.2} s in all \
             (the longest {:.2} s, typically {:.2} s): {share:.2} % of the {} run",
            if n == 1 { "" } else { "s" },
            total.as_secs_f64(),
            longest.as_secs_f64(),
            typical.as_secs_f64(),
            mpiq::analysis::hang::duration_words(u64::try_from(ran.as_millis()).unwrap_or(u64::MAX)),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_costs_its_longest_stop() {
        let mut c = DetectCost::default();
        assert_eq!(c.words(Duration::from_secs(10)), None);
        let ms = Duration::from_millis;
        c.add_check(&HashMap::from([(1, ms(100)), (2, ms(150))]));
        c.add_check(&HashMap::from([(1, ms(50))]));
        c.add_check(&HashMap::new());
        assert_eq!(c.last(), Some(ms(0)));
        assert_eq!(
            c.words(Duration::from_secs(20)).as_deref(),
            Some(
                "--detect's 3 checks held the ranks on this node stopped for 0.20 s in all \
                 (the longest 0.15 s, typically 0.05 s): 1.00 % of the 20 s run"
            )
        );
    }
}
