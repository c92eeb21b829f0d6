//! The queues of every example under both MPIs, read through real gdb
//! attached to every rank, must be exactly what the example documents
//! (tests/src/expect.rs mirrors the examples' header comments).

use mpiq_tests::expect::{check_process, expected};
use mpiq_tests::frontends::{queues, snapshot, FrontEnd};
use mpiq_tests::golden::portable;
use mpiq_tests::{gdb, Example, Job, Mpi};

fn check_example(mpi: Mpi, example: Example, fe: FrontEnd) {
    gdb::require_ptrace();
    let args = example.default_args();
    let Some(job) = Job::builder(mpi, example).start_supported() else {
        return;
    };
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

mpiq_tests::per_example! { |mpi, example| check_example(mpi, example, FrontEnd::Gdb);
    gdb_ring_openmpi: OpenMpi, Ring;
    gdb_ring_mpich: Mpich, Ring;
    gdb_named_comms_openmpi: OpenMpi, NamedComms;
    gdb_named_comms_mpich: Mpich, NamedComms;
    gdb_unexpected_openmpi: OpenMpi, Unexpected;
    gdb_unexpected_mpich: Mpich, Unexpected;
    gdb_deadlock_openmpi: OpenMpi, Deadlock;
    gdb_deadlock_mpich: Mpich, Deadlock;
    gdb_many_ops_openmpi: OpenMpi, ManyOps;
    gdb_many_ops_mpich: Mpich, ManyOps;
    gdb_sessions_mpich: Mpich, Sessions;
    gdb_ring_openmpi5: OpenMpi5, Ring;
    gdb_named_comms_openmpi5: OpenMpi5, NamedComms;
    gdb_unexpected_openmpi5: OpenMpi5, Unexpected;
    gdb_deadlock_openmpi5: OpenMpi5, Deadlock;
    gdb_many_ops_openmpi5: OpenMpi5, ManyOps;
    gdb_sessions_openmpi5: OpenMpi5, Sessions;
    gdb_ring_mpich_ch4: MpichCh4, Ring;
    gdb_named_comms_mpich_ch4: MpichCh4, NamedComms;
    gdb_unexpected_mpich_ch4: MpichCh4, Unexpected;
    gdb_deadlock_mpich_ch4: MpichCh4, Deadlock;
    gdb_many_ops_mpich_ch4: MpichCh4, ManyOps;
    gdb_sessions_mpich_ch4: MpichCh4, Sessions;
}

/// gdb, lldb and the CLI attached in turn to the same stopped rank give the
/// same snapshot, apart from the fields documented as host-specific.
fn differential(mpi: Mpi, example: Example) {
    gdb::require_ptrace();
    let Some(job) = Job::builder(mpi, example).start_supported() else {
        return;
    };
    for rank in job.ranks() {
        let mut seen: Vec<(FrontEnd, serde_json::Value)> = Vec::new();
        for fe in FrontEnd::ALL {
            let v = portable(snapshot(fe, rank.pid, "--all"));
            seen.push((fe, v["processes"].clone()));
        }
        let (first_fe, first) = &seen[0];
        for (fe, v) in &seen[1..] {
            if v != first {
                panic!(
                    "{} under {mpi}, rank {}: {fe:?} and {first_fe:?} differ\n--- {first_fe:?} ---\n{}\n--- {fe:?} ---\n{}",
                    example.name(),
                    rank.rank,
                    serde_json::to_string_pretty(first).unwrap(),
                    serde_json::to_string_pretty(v).unwrap()
                );
            }
        }
        assert!(
            Job::is_running(rank.pid),
            "rank {} was left stopped or traced",
            rank.rank
        );
    }
}

mpiq_tests::per_example! { differential;
    same_snapshot_ring_openmpi: OpenMpi, Ring;
    same_snapshot_ring_mpich: Mpich, Ring;
    same_snapshot_named_comms_openmpi: OpenMpi, NamedComms;
    same_snapshot_named_comms_mpich: Mpich, NamedComms;
    same_snapshot_unexpected_mpich: Mpich, Unexpected;
    same_snapshot_deadlock_openmpi: OpenMpi, Deadlock;
    same_snapshot_many_ops_mpich: Mpich, ManyOps;
    same_snapshot_sessions_mpich: Mpich, Sessions;
    same_snapshot_ring_openmpi5: OpenMpi5, Ring;
    same_snapshot_named_comms_openmpi5: OpenMpi5, NamedComms;
    same_snapshot_unexpected_openmpi5: OpenMpi5, Unexpected;
    same_snapshot_deadlock_openmpi5: OpenMpi5, Deadlock;
    same_snapshot_many_ops_openmpi5: OpenMpi5, ManyOps;
    same_snapshot_sessions_openmpi5: OpenMpi5, Sessions;
    same_snapshot_ring_mpich_ch4: MpichCh4, Ring;
    same_snapshot_named_comms_mpich_ch4: MpichCh4, NamedComms;
    same_snapshot_unexpected_mpich_ch4: MpichCh4, Unexpected;
    same_snapshot_deadlock_mpich_ch4: MpichCh4, Deadlock;
    same_snapshot_many_ops_mpich_ch4: MpichCh4, ManyOps;
    same_snapshot_sessions_mpich_ch4: MpichCh4, Sessions;
}
