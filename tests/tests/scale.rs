//! Short versions of issue 26's benchmarks and of issue 28's flight
//! recorder benchmark (docs/PERFORMANCE.md has their figures; the timings
//! printed here are for the log, never asserted).
//!
//! The scale harness: `mpiq-bench scale` runs
//! the real front end, `mpiq job --slurm J`, on 1,000 simulated ranks on 32
//! nodes whose collectors play four real jobs of the test bed's Open MPI
//! (recorded here, by a real `mpiq collect`). The report of that deadlocked
//! job must say so on its first line and fit in two screens. The timings
//! and memory it prints are for the log; docs/PERFORMANCE.md has the
//! benchmark's figures (16,000 and 100,000 ranks are not run here).

use mpiq_tests::frontends::artifact;
use mpiq_tests::run::run;

#[test]
fn a_thousand_simulated_ranks_lead_with_their_verdict() {
    let mut cmd = std::process::Command::new(artifact("mpiq-bench"));
    cmd.args(["scale", "--ranks", "1000", "--mpi", "openmpi"]);
    let r = run(cmd);
    assert!(r.success, "mpiq-bench scale failed:\n{}", r.all());
    eprintln!("{}", r.stdout);
    // | ranks | nodes | wall s | peak MiB | exit | verdict at line | report lines | first line |
    let row: Vec<&str> = r
        .stdout
        .lines()
        .find(|l| l.starts_with("| 1000 |"))
        .unwrap_or_else(|| panic!("no row for 1,000 ranks:\n{}", r.all()))
        .split('|')
        .map(str::trim)
        .collect();
    assert_eq!(row[2], "32", "nodes: {row:?}");
    assert_eq!(row[5], "3", "mpiq job's exit status is a deadlock's: {row:?}");
    assert_eq!(row[6], "1", "the verdict is the report's first line: {row:?}");
    let lines: usize = row[7].parse().unwrap_or(usize::MAX);
    assert!(lines <= 100, "the report takes {lines} lines: {row:?}");
    assert_eq!(row[8], "Deadlock analysis: DEADLOCK", "{row:?}");
}

/// 1,000 simulated ranks of a packaged MPI (Debian's Open MPI: no readable queues, the verdict
/// from the stacks alone), every block the deadlock example, all ranks at the same place: the
/// summary names them in one clause, never one per rank, and no address (issue 41).
#[test]
fn a_thousand_ranks_of_a_packaged_mpi_at_one_place_are_one_clause() {
    let mut cmd = std::process::Command::new(artifact("mpiq-bench"));
    cmd.args([
        "scale",
        "--ranks",
        "1000",
        "--mpi",
        "debian-openmpi",
        "--only",
        "deadlock",
    ]);
    let r = run(cmd);
    assert!(r.success, "mpiq-bench scale failed:\n{}", r.all());
    eprintln!("{}", r.stdout);
    let summary = r
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("summary at 1000 ranks: "))
        .unwrap_or_else(|| panic!("no summary for 1,000 ranks:\n{}", r.all()));
    assert!(summary.starts_with("deadlock (from stacks only"), "{summary}");
    assert!(
        summary.ends_with(": ranks 0-999 wait in MPI_Wait (deadlock.c:38)"),
        "{summary}"
    );
    assert_eq!(summary.matches(" wait in ").count(), 1, "{summary}");
    assert!(!summary.contains("0x"), "an address in the summary: {summary}");
}

/// `mpiq-bench single` on a 2-rank job, one run of each: one dump against
/// `mpiq replay` of it, and `mpiq stacks` against elfutils' `eu-stack`
/// (installed by scripts/testbed). Every front end must succeed (the
/// benchmark checks each exit) and both ratios be printed.
#[test]
fn the_single_process_benchmark_runs() {
    let mut cmd = std::process::Command::new(artifact("mpiq-bench"));
    cmd.args(["single", "--ranks", "2", "--reps", "1", "--mpi", "openmpi"]);
    let r = run(cmd);
    assert!(r.success, "mpiq-bench single failed:\n{}", r.all());
    eprintln!("{}", r.stdout);
    let ratios: Vec<f64> = r
        .stdout
        .lines()
        .filter(|l| l.trim_start().starts_with("ratio"))
        .filter_map(|l| l.split_whitespace().nth(1)?.trim_end_matches('x').parse().ok())
        .collect();
    assert_eq!(ratios.len(), 2, "two ratios expected:\n{}", r.all());
    assert!(
        ratios.iter().all(|x| x.is_finite() && *x > 0.0),
        "{ratios:?}:\n{}",
        r.all()
    );
}

/// `mpiq-bench recorder --quick` under the test bed's Open MPI: the flight
/// recorder's cost per MPI call, without and with it preloaded, one round.
/// Every case must be printed with its numbers (times, differences, noise),
/// the kernel's overhead and each rank's memory; the instruction counts too
/// when valgrind is installed. No figure is judged here: docs/PERFORMANCE.md
/// has them, measured on a quiet machine.
#[test]
fn the_flight_recorder_benchmark_runs() {
    let mut cmd = std::process::Command::new(artifact("mpiq-bench"));
    cmd.args(["recorder", "--quick", "--mpi", "openmpi"]);
    let r = run(cmd);
    assert!(r.success, "mpiq-bench recorder failed:\n{}", r.all());
    eprintln!("{}", r.stdout);
    let number = |cell: &str| -> f64 {
        cell.trim_start_matches('±')
            .trim_end_matches(" %")
            .trim_start_matches('+')
            .parse()
            .unwrap_or(f64::NAN)
    };
    let row = |prefix: &str| -> Vec<String> {
        r.stdout
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no row {prefix:?}:\n{}", r.all()))
            .split('|')
            .map(|c| c.trim().to_string())
            .collect()
    };
    // | MPI | case | calls/iter | without | with | added (runs) | added % | noise (runs) | added (in run) | noise (in run) |
    for case in [
        "iprobe",
        "test_null",
        "pingpong_8",
        "pingpong_1m",
        "allreduce_1",
        "allreduce_128k",
        "kernel",
    ] {
        let cells = row(&format!("| Open MPI 4.1.4 | {case} ("));
        let numbers: Vec<f64> = cells[3..=10].iter().map(|c| number(c)).collect();
        assert!(numbers.iter().all(|x| x.is_finite()), "{case}: {cells:?}:\n{}", r.all());
        assert!(numbers[1] > 0.0 && numbers[2] > 0.0, "{case}: times: {cells:?}");
    }
    // | MPI | grid a rank | MPI calls/iter | without | with | overhead (runs) | noise (runs) | overhead (in run) | noise (in run) |
    let kernel = row("| Open MPI 4.1.4 | 128 × 128 |");
    assert!(
        kernel[3..=9].iter().all(|c| number(c).is_finite()),
        "kernel: {kernel:?}"
    );
    let valgrind =
        std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("valgrind").is_file()));
    if valgrind {
        // | MPI | case | without | with | added | without, again |
        let cg = row("| Open MPI 4.1.4 | iprobe |");
        assert!(
            cg[3..=5].iter().all(|c| number(c) > 0.0),
            "instructions per call: {cg:?}"
        );
    }
    let memory = r
        .stdout
        .lines()
        .find(|l| l.starts_with("- Open MPI 4.1.4: rank 0 "))
        .unwrap_or_else(|| panic!("no memory line:\n{}", r.all()));
    assert!(memory.contains("rank 1 "), "{memory}");
    assert!(r.stdout.contains("- static tables: `mpiq_recorder` "), "{}", r.all());
}
