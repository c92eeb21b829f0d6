//! The pure parts of `mpiq watch`: letters, where lines, the history, the
//! grouping, the keys, and the screen drawn on ratatui's `TestBackend`.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use mpiq::{Frame as StackFrame, ProcessSnapshot, Snapshot, Stacks, ThreadStack};

use super::model::{group, letter, where_line, Key, Session};
use super::ui::{self, Mode, Replaying, View};
use super::{on_key, Action};

fn frame(function: &str, object: &str, file: Option<(&str, u32)>) -> StackFrame {
    StackFrame {
        pc: "0x1".into(),
        function: Some(function.into()),
        object: Some(object.into()),
        file: file.map(|(f, _)| f.into()),
        line: file.map(|(_, l)| l),
        inlined: false,
        offset: None,
        python: false,
    }
}

const LIBC: &str = "/lib/x86_64-linux-gnu/libc.so.6";
const LIBMPI: &str = "/opt/ompi/lib/libmpi.so.40";

/// A thread in `call` (an MPI function, "usleep", "pause" or "main").
fn thread(tid: u64, call: &str) -> ThreadStack {
    let main = frame("main", "/work/app", Some(("app.c", 10 + tid as u32)));
    let frames = match call {
        "main" => vec![main],
        "usleep" | "pause" => vec![frame(call, LIBC, None), main],
        mpi => vec![frame("opal_progress", LIBMPI, None), frame(mpi, LIBMPI, None), main],
    };
    ThreadStack {
        tid,
        frames,
        ..ThreadStack::default()
    }
}

fn process(rank: i32, calls: &[&str]) -> ProcessSnapshot {
    let threads: Vec<ThreadStack> = calls
        .iter()
        .enumerate()
        .map(|(i, c)| thread(100 + i as u64, c))
        .collect();
    ProcessSnapshot {
        stacks: Some(Stacks {
            where_: Some(mpiq::stacks::where_words(&threads)),
            threads,
            ..Stacks::default()
        }),
        ..ProcessSnapshot::new(Some(4000 + rank as u32), Some(rank), "/work/app")
    }
}

fn snapshot(calls: &[&str]) -> Snapshot {
    Snapshot {
        processes: calls.iter().enumerate().map(|(r, c)| process(r as i32, &[c])).collect(),
        ..Snapshot::default()
    }
}

#[test]
fn a_letter_for_every_state() {
    let one = |c: &str| letter(&process(0, &[c]));
    assert_eq!(one("main"), '.');
    assert_eq!(one("usleep"), '.', "a sleep returns by itself: computing");
    assert_eq!(one("pause"), 'b');
    assert_eq!(one("MPI_Send"), 'S');
    assert_eq!(one("MPI_Ssend"), 'S');
    assert_eq!(one("MPI_Recv"), 'R');
    assert_eq!(one("MPI_Sendrecv"), 'R');
    assert_eq!(one("MPI_Probe"), 'R');
    assert_eq!(one("MPI_Wait"), 'W');
    assert_eq!(one("MPI_Waitall"), 'W');
    assert_eq!(one("MPI_Test"), 'T');
    assert_eq!(one("MPI_Barrier"), 'C');
    assert_eq!(one("MPI_Allreduce"), 'C');
    assert_eq!(one("MPI_Comm_split"), 'C');
    assert_eq!(one("MPI_Init"), 'I');
    assert_eq!(one("MPI_Finalize"), 'F');
    assert_eq!(one("MPI_Win_fence"), 'O');
    assert_eq!(one("MPI_File_write_all"), 'D');
    assert_eq!(one("MPI_Comm_rank"), 'M');
    // The thread in MPI speaks for the process, whichever comes first.
    assert_eq!(letter(&process(0, &["main", "MPI_Recv"])), 'R');
    // Nothing readable.
    let mut p = process(0, &["main"]);
    p.stacks = None;
    p.error = Some("no such process\nmore".into());
    assert_eq!(letter(&p), '?');
    assert_eq!(where_line(&p), "unreadable: no such process");
    p.stacks = Some(Stacks {
        missing: Some("a recording made without them".into()),
        ..Stacks::default()
    });
    p.error = None;
    assert_eq!(letter(&p), '?');
    assert_eq!(where_line(&p), "no call stacks: a recording made without them");
    assert_eq!(
        where_line(&process(3, &["MPI_Recv"])),
        "in MPI_Recv, called from main (app.c:110)"
    );
}

#[test]
fn the_history_grows_and_marks_who_moved() {
    let mut s = Session::new(false);
    s.push(snapshot(&["MPI_Recv", "main", "MPI_Barrier"]), 1_000, Some(5));
    s.push(snapshot(&["MPI_Recv", "MPI_Barrier", "MPI_Barrier"]), 2_000, Some(5));
    s.push(snapshot(&["MPI_Recv", "MPI_Barrier"]), 3_000, None);
    assert_eq!(s.len(), 3);
    // Only the last two samples are kept live; the history is whole.
    assert!(s.sample(0).is_none() && s.sample(1).is_some() && s.sample(2).is_some());
    let rows = s.rows(2, 80, 10);
    let text: Vec<(String, String, bool)> = rows
        .iter()
        .map(|r| (r.who.clone(), r.strip.iter().map(|c| c.letter).collect(), r.changed))
        .collect();
    assert_eq!(
        text,
        [
            ("0".into(), "RRR".into(), false),
            ("1".into(), ".CC".into(), false),
            // Gone from the last sample: a blank, and "moved".
            ("2".into(), "CC ".into(), false),
        ]
    );
    assert!(rows[1].strip[1].changed && !rows[1].strip[2].changed);
    assert_eq!(rows[2].where_, "(not in this sample)");
    assert_eq!(rows[0].pid, "4000");
    // The analysis of each sample against the one before.
    assert_eq!(s.sample(2).map(|x| x.number), Some(3));
    // As many letters as fit, the newest on the right.
    assert_eq!(
        s.rows(2, 2, 10)[1].strip.iter().map(|c| c.letter).collect::<String>(),
        "CC"
    );
}

#[test]
fn ranks_that_do_not_fit_are_grouped_by_place() {
    let mut s = Session::new(true);
    s.push(
        snapshot(&["MPI_Recv", "MPI_Recv", "MPI_Barrier", "MPI_Recv", "MPI_Recv"]),
        1,
        None,
    );
    // Rank 4 was computing before: its group's history differs there.
    let mut second = snapshot(&["MPI_Recv", "MPI_Recv", "MPI_Barrier", "MPI_Recv", "MPI_Recv"]);
    second.processes[3] = process(3, &["main"]);
    s.push(second, 2, None);
    s.push(
        snapshot(&["MPI_Recv", "MPI_Recv", "MPI_Barrier", "MPI_Recv", "MPI_Recv"]),
        3,
        None,
    );
    assert_eq!(s.rows(2, 10, 5).len(), 5, "five fit");
    let rows = s.rows(2, 10, 4);
    let text: Vec<(String, String, bool)> = rows
        .iter()
        .map(|r| (r.who.clone(), r.strip.iter().map(|c| c.letter).collect(), r.changed))
        .collect();
    assert_eq!(
        text,
        [
            ("ranks 0, 1, 3 and 4".into(), "R*R".into(), true),
            ("rank 2".into(), "CCC".into(), false),
        ]
    );
    assert_eq!(rows[0].keys, [Key::Rank(0), Key::Rank(1), Key::Rank(3), Key::Rank(4)]);
    assert!(rows[0].pid.is_empty());
    // A replay keeps every sample: an earlier one shows as it was.
    let rows = s.rows(1, 10, 4);
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert_eq!(group(s.rows(0, 10, 10)).len(), 2);
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn screen(session: &Session, view: &mut View, w: u16, h: u16) -> Vec<String> {
    ui::draw_text(session, view, &mpiq::DumpOptions::default(), w, h).unwrap()
}

#[test]
fn the_screen_and_the_keys() {
    let mut s = Session::new(false);
    for i in 0..3u64 {
        s.push(
            snapshot(&["MPI_Wait", "MPI_Wait", "MPI_Recv"]),
            1_700_000_000_000 + i * 10_000,
            Some(12),
        );
    }
    let mut view = View::new("mpirun 42".into(), std::time::Duration::from_secs(1), None);
    view.at = 2;
    let lines = screen(&s, &mut view, 100, 12);
    assert!(
        lines[0].contains("mpiq watch  mpirun 42   sample 3 at 22:13:40 UTC (took 12 ms)   3 ranks"),
        "{lines:#?}"
    );
    // Nothing changed in three samples 10 s apart: still for 20 s, not
    // hung before --min-hang's minute.
    assert!(
        lines[1].starts_with(" verdict: [nothing changed for 20 s; hung after 1 min] "),
        "{lines:#?}"
    );
    assert!(
        lines[2].contains("rank  pid        for  where") && lines[2].contains("history"),
        "{lines:#?}"
    );
    assert!(
        lines[3].starts_with(">    0 4000        20s  in MPI_Wait, called from main (app.c:110)  WWW"),
        "{lines:#?}"
    );
    assert!(
        lines[5].contains("2 4002        20s  in MPI_Recv, called from main (app.c:110)"),
        "{lines:#?}"
    );
    assert!(lines[9].contains(". computing"), "{lines:#?}");
    assert!(
        lines[10].contains("q quit") && lines[10].contains("r/space sample now"),
        "{lines:#?}"
    );
    // Down twice (no further than the last), then Enter: rank 2's stacks.
    for _ in 0..3 {
        assert_eq!(on_key(&mut view, &s, key(KeyCode::Down)), Action::None);
    }
    assert_eq!(view.selected, 2);
    on_key(&mut view, &s, key(KeyCode::Enter));
    assert_eq!(
        view.mode,
        Mode::Detail {
            key: Key::Rank(2),
            scroll: 0
        }
    );
    let lines = screen(&s, &mut view, 100, 30);
    let all = lines.join("\n");
    assert!(
        all.contains("rank 2: every thread's frames and the queues, sample 3"),
        "{all}"
    );
    assert!(
        all.contains("Threads (1):") && all.contains("#1  0x1 in MPI_Recv"),
        "{all}"
    );
    on_key(&mut view, &s, key(KeyCode::Down));
    assert_eq!(
        view.mode,
        Mode::Detail {
            key: Key::Rank(2),
            scroll: 1
        }
    );
    on_key(&mut view, &s, key(KeyCode::Esc));
    assert_eq!(view.mode, Mode::List);
    assert_eq!(on_key(&mut view, &s, key(KeyCode::Char('r'))), Action::SampleNow);
    assert_eq!(on_key(&mut view, &s, key(KeyCode::Char('p'))), Action::Pause(true));
    assert!(screen(&s, &mut view, 100, 12)[0].contains("[PAUSED]"));
    assert_eq!(on_key(&mut view, &s, key(KeyCode::Char('p'))), Action::Pause(false));
    assert_eq!(on_key(&mut view, &s, key(KeyCode::Char('q'))), Action::Quit);
    assert_eq!(
        on_key(&mut view, &s, KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)),
        Action::Quit
    );
    // Too small for every rank: groups.
    view.selected = 0;
    view.selected_key = None;
    let lines = screen(&s, &mut view, 100, 8);
    assert!(lines[2].contains("ranks            for  where"), "{lines:#?}");
    assert!(
        lines[3].contains("ranks 0 and 1            20s  in MPI_Wait, called from main (app.c:110)  WWW"),
        "{lines:#?}"
    );
    assert!(lines[4].contains("rank 2            20s  in MPI_Recv"), "{lines:#?}");
}

#[test]
fn a_replay_steps_and_plays() {
    let mut s = Session::new(true);
    for calls in [["main", "main"], ["MPI_Recv", "main"], ["MPI_Recv", "MPI_Send"]] {
        s.push(snapshot(&calls), 0, None);
    }
    let mut view = View::new(
        "replay of s.rec".into(),
        std::time::Duration::from_secs(1),
        Some(Replaying {
            total: 4,
            playing: false,
        }),
    );
    let lines = screen(&s, &mut view, 100, 10);
    assert!(
        lines[0].contains("sample 1 of 4") && lines[0].contains("[replaying: 3 of 4 read]"),
        "{lines:#?}"
    );
    assert!(lines[8].contains("left/right step"), "{lines:#?}");
    for _ in 0..5 {
        on_key(&mut view, &s, key(KeyCode::Right));
    }
    assert_eq!(view.at, 2, "no further than the samples read");
    let lines = screen(&s, &mut view, 100, 10);
    assert!(
        lines[3].contains("(app.c:110)  .RR ") && lines[4].contains("(app.c:110)  ..S "),
        "{lines:#?}"
    );
    on_key(&mut view, &s, key(KeyCode::Left));
    let lines = screen(&s, &mut view, 100, 10);
    assert!(lines[0].contains("sample 2 of 4"), "{lines:#?}");
    assert!(
        lines[3].contains("(app.c:110)  .R ") && lines[4].contains("not in MPI, in main (app.c:110)            .. "),
        "{lines:#?}"
    );
    assert_eq!(on_key(&mut view, &s, key(KeyCode::Char(' '))), Action::None);
    assert_eq!(view.replay.as_ref().map(|r| r.playing), Some(true));
}

#[test]
fn arguments() {
    use crate::args::{Cli, Command, DEFAULT_NODE_TIMEOUT_SECS};
    use clap::Parser;
    let parse = |args: &[&str]| {
        let mut all = vec!["mpiq", "watch"];
        all.extend_from_slice(args);
        Cli::try_parse_from(all).map(|c| match c.command {
            Command::Watch(w) => w,
            other => panic!("not watch: {other:?}"),
        })
    };
    let w = parse(&["--starter", "42"]).unwrap();
    assert_eq!(
        (w.starter, w.interval, w.node_timeout),
        (Some(42), std::time::Duration::from_secs(1), DEFAULT_NODE_TIMEOUT_SECS)
    );
    let w = parse(&[
        "--slurm",
        "7.1",
        "--interval",
        "250ms",
        "--record",
        "s.rec",
        "--in-process",
    ])
    .unwrap();
    assert_eq!(w.slurm.as_deref(), Some("7.1"));
    assert_eq!(w.interval, std::time::Duration::from_millis(250));
    let o = w.to_options().unwrap();
    assert_eq!(o.record.as_deref(), Some(std::path::Path::new("s.rec")));
    assert!(o.in_process);
    let w = parse(&["--replay", "s.rec"]).unwrap();
    assert_eq!(w.replay.as_deref(), Some(std::path::Path::new("s.rec")));
    for bad in [
        &[][..],
        &["--starter", "1", "--slurm", "2"],
        &["--starter", "1", "--replay", "x"],
        &["--replay", "x", "--record", "y"],
        &["--starter", "1", "--json"],
        &["--starter", "1", "--interval", "0"],
    ] {
        assert!(parse(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn how_long_each_rank_has_been_there_and_whom_the_others_wait_for() {
    let mut s = Session::new(false);
    // Rank 2 computes (in its own code) while 0 and 1 wait in a barrier.
    for (i, r2) in ["usleep", "usleep", "main"].iter().enumerate() {
        s.push(
            snapshot(&["MPI_Barrier", "MPI_Barrier", r2]),
            1_700_000_000_000 + i as u64 * 5_000,
            None,
        );
    }
    let sample = s.sample(2).expect("kept");
    assert_eq!(sample.hang.ranks_still_ms.get(&0), Some(&10_000), "{:?}", sample.hang);
    let rows = s.rows(2, 40, 10);
    assert_eq!(rows[0].still_ms, Some(10_000));
    let waited: Vec<bool> = rows.iter().map(|r| r.waited_on).collect();
    assert_eq!(waited, [false, false, true], "{:?}", sample.analysis.waited_on);
    let mut view = View::new("mpirun 42".into(), std::time::Duration::from_secs(5), None);
    view.at = 2;
    let lines = screen(&s, &mut view, 120, 12);
    assert!(lines[5].contains("      10s  » "), "{lines:#?}");
}
