//! The queues of every example under both MPIs, read through real gdb
//! attached to every rank, must be exactly what the example documents
//! (tests/src/expect.rs mirrors the examples' header comments).

use mpiq_tests::expect::{check_process, expected};
use mpiq_tests::frontends::{queues, snapshot, FrontEnd};
use mpiq_tests::{gdb, Example, Job, Mpi};

fn check_example(mpi: Mpi, example: Example, fe: FrontEnd) {
    gdb::require_ptrace();
    if let Some(why) = example.unsupported_reason(mpi) {
        eprintln!("SKIPPED: {} under {mpi}: {why}", example.name());
        return;
    }
    let args = example.default_args();
    let job = Job::builder(mpi, example).start();
    let n = job.nprocs() as i64;
    for rank in job.ranks() {
        let v = snapshot(fe, rank.pid, "");
        let procs = v["processes"].as_array().expect("processes");
        assert_eq!(procs.len(), 1, "{v}");
        let p = &procs[0];
        assert_eq!(p["pid"], rank.pid, "{p}");
        assert_eq!(p["world_rank"], rank.rank, "{p}");
        let exp = expected(example, mpi, rank.rank as i64, n, args);
        if let Err(e) = check_process(p, &exp, mpi) {
            panic!(
                "{} under {mpi}, rank {} via {fe:?}:\n{e}\n--- snapshot ---\n{}",
                example.name(),
                rank.rank,
                serde_json::to_string_pretty(p).unwrap()
            );
        }
        // The text view names every communicator that has pending operations.
        let text = queues(fe, rank.pid, "");
        assert!(text.success, "{}", text.all());
        for op in &exp.ops {
            assert!(
                text.stdout.contains(&format!("Communicator '{}'", op.comm)),
                "text view lacks '{}':\n{}",
                op.comm,
                text.all()
            );
        }
        if mpi.is_open_mpi() && !exp.ops.is_empty() {
            assert!(
                text.stdout.contains("Unexpected messages: not available"),
                "{}",
                text.all()
            );
        }
    }
}

macro_rules! example_tests {
    ($($name:ident: $mpi:expr, $ex:expr;)*) => {
        $(
            #[test]
            fn $name() {
                check_example($mpi, $ex, FrontEnd::Gdb);
            }
        )*
    };
}

example_tests! {
    gdb_ring_openmpi: Mpi::OpenMpi, Example::Ring;
    gdb_ring_mpich: Mpi::Mpich, Example::Ring;
    gdb_named_comms_openmpi: Mpi::OpenMpi, Example::NamedComms;
    gdb_named_comms_mpich: Mpi::Mpich, Example::NamedComms;
    gdb_unexpected_openmpi: Mpi::OpenMpi, Example::Unexpected;
    gdb_unexpected_mpich: Mpi::Mpich, Example::Unexpected;
    gdb_deadlock_openmpi: Mpi::OpenMpi, Example::Deadlock;
    gdb_deadlock_mpich: Mpi::Mpich, Example::Deadlock;
    gdb_many_ops_openmpi: Mpi::OpenMpi, Example::ManyOps;
    gdb_many_ops_mpich: Mpi::Mpich, Example::ManyOps;
    gdb_sessions_mpich: Mpi::Mpich, Example::Sessions;
}
