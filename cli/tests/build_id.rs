//! Separate debug files found only by build id, under a debug directory
//! named by `MPIQ_DEBUG_FILE_DIRECTORY` (gdb: `set debug-file-directory`).
//! A test binary of its own: it sets an environment variable.

mod common;

use common::*;
use mpiq_cli::LiveProcess;

#[test]
fn build_id_debug_files_match_gdb() {
    if !tools_present() {
        return;
    }
    let b = build(Variant::BuildId);
    let root = b.dir.join("debugroot");
    // SAFETY (of the test): the only test in this binary; no other thread
    // reads the environment yet.
    std::env::set_var(mpiq_cli::debugfile::DEBUG_DIR_ENV, &root);
    let r = start(&b);
    let qs = questions();
    let mine: Vec<Option<u64>> = {
        let mut p = LiveProcess::attach(r.pid()).unwrap();
        let lib = p
            .image()
            .objects()
            .iter()
            .find(|o| o.name.ends_with("libfx.so"))
            .unwrap()
            .file
            .clone();
        assert!(!lib.has_dwarf(), "the library itself was stripped");
        let dbg = lib.debug_info().unwrap().expect("found by build id");
        assert!(dbg.path().starts_with(&root), "{}", dbg.path().display());
        let a = qs.iter().map(|q| ask_mpiq(&mut p, q)).collect();
        p.detach().unwrap();
        a
    };
    assert_running(r.pid());
    let extra = [
        "-iex".to_string(),
        format!("set debug-file-directory {}", root.display()),
    ];
    let gdb = ask_gdb(&["-p".into(), r.pid().to_string()], &extra, &qs);
    assert_eq!(mine, gdb);
    assert!(mine.iter().all(Option::is_some), "{mine:?}");
}
