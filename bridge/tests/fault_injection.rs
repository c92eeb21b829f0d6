//! Property tests of the bridge's own memory paths on wild addresses and
//! failing reads, with no debug library: the page cache (in front of every
//! library read) and the replay target (`mpiq replay`). Both once panicked on
//! an address in the last page of the address space (found by
//! `tests/tests/fuzz.rs`); here thousands of random reads, many near the top
//! of the address space and near readable-region edges, are checked against
//! the target read directly. The target is the testkit's memory-only `Mem`
//! behind its fault injector (`mpiq::testkit`, the cargo feature `testkit`).

use mpiq::cache::{PageCache, PAGE};
use mpiq::record::{MemoryRead, Recording, Replay};
use mpiq::testkit::{Faults, Faulty, Mem, Rng};
use mpiq::{Target, TargetError};

/// The byte at each readable address: mixed from several of its bits, so a
/// byte taken from the wrong page or block shows.
fn byte_at(a: u64) -> u8 {
    Mem::scrambled(a)
}

/// Memory readable in a few regions (one at the very top of the address
/// space), each byte [`byte_at`] its address; every other read fails. No
/// fault injected yet.
fn regions() -> Faulty<Mem> {
    let mem = Mem::with_regions(&[
        (0x10_0000, 0x10_0000 + 5 * PAGE + 123), // ends inside a page
        (0x7fff_0000_0800, 0x7fff_0000_0800 + 40 * PAGE),
        (u64::MAX - 3 * PAGE + 1, u64::MAX), // the last pages (the very last byte is not readable)
    ])
    .with_pattern(byte_at);
    Faulty::new(mem, Faults::default())
}

/// An address near an edge of a region or of the address space.
fn interesting_addr(rng: &mut Rng, r: &Mem) -> u64 {
    let (s, e) = r.regions[rng.below(r.regions.len() as u64) as usize];
    let near = match rng.below(5) {
        0 => s,
        1 => e,
        2 => u64::MAX,
        3 => s & !(PAGE - 1),
        _ => return rng.next_u64(),
    };
    near.wrapping_add(rng.below(2 * PAGE)).wrapping_sub(PAGE)
}

#[test]
fn page_cache_agrees_with_the_target_on_wild_reads() {
    let mut rng = Rng(0x6d70_6971);
    for case in 0..2000 {
        let block = PAGE << rng.below(5);
        let mut cache = PageCache::with_block(block);
        let mut target = regions();
        if rng.below(4) == 0 {
            // Every read from the N-th on fails.
            target.faults.fail_from = Some(1 + rng.below(20));
        }
        for _ in 0..50 {
            let addr = interesting_addr(&mut rng, &target.inner);
            let len = match rng.below(4) {
                0 => 1 + rng.below(8),
                1 => 1 + rng.below(64),
                2 => 1 + rng.below(2 * PAGE),
                _ => 1 + rng.below(3 * PAGE),
            } as usize;
            let mut buf = vec![0u8; len];
            let readable = target.inner.readable(addr, len as u64) && target.faults.fail_from.is_none();
            match cache.read(&mut target, addr, &mut buf) {
                Ok(()) => {
                    for (i, b) in buf.iter().enumerate() {
                        let a = addr.wrapping_add(i as u64);
                        assert_eq!(
                            *b,
                            byte_at(a),
                            "case {case}: wrong byte at {a:#x} (read {addr:#x}+{len})"
                        );
                    }
                }
                Err(TargetError::Unreadable { .. }) => {
                    assert!(!readable, "case {case}: a readable range failed: {addr:#x}+{len}");
                }
                Err(e) => panic!("case {case}: {e}"),
            }
        }
    }
}

#[test]
fn replay_answers_wild_reads_without_panicking() {
    let base = u64::MAX - 2 * PAGE + 1;
    let page: Vec<u8> = (0..PAGE).map(|i| byte_at(base + i)).collect();
    let hex: String = page.iter().map(|b| format!("{b:02x}")).collect();
    let rec = Recording {
        memory: vec![
            MemoryRead {
                addr: base,
                hex: Some(hex),
                len: PAGE,
                error: None,
            },
            MemoryRead {
                addr: 0x1000,
                hex: None,
                len: 8,
                error: Some("not mapped".into()),
            },
        ],
        ..Recording::default()
    };
    let mut replay = Replay::new(rec).expect("a valid recording");
    let mut rng = Rng(7);
    for _ in 0..20_000 {
        let addr = match rng.below(3) {
            0 => base.wrapping_add(rng.below(2 * PAGE)),
            1 => u64::MAX - rng.below(64),
            _ => rng.next_u64(),
        };
        let len = 1 + rng.below(2 * PAGE) as usize;
        let mut buf = vec![0u8; len];
        let inside = addr >= base && addr.checked_add(len as u64).is_some_and(|e| e <= base + PAGE);
        match replay.read_memory(addr, &mut buf) {
            Ok(()) => {
                assert!(inside, "{addr:#x}+{len} was not recorded");
                assert_eq!(buf[0], byte_at(addr));
            }
            Err(_) => assert!(!inside, "{addr:#x}+{len} was recorded"),
        }
    }
    assert!(replay.read_memory(0x1000, &mut [0u8; 8]).is_err());
}
