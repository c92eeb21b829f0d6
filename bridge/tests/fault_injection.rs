//! Property tests of the bridge's own memory paths on wild addresses and
//! failing reads, with no debug library: the page cache (in front of every
//! library read) and the replay target (`mpiq replay`). Both once panicked on
//! an address in the last page of the address space (found by
//! `tests/tests/fuzz.rs`); here thousands of random reads, many near the top
//! of the address space and near readable-region edges, are checked against
//! the target read directly.

use mpiq::cache::{PageCache, PAGE};
use mpiq::record::{MemoryRead, Recording, Replay};
use mpiq::{ByteOrder, ProcessDescription, Target, TargetError, TypeId, TypeSizes};

/// SplitMix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Memory readable in a few regions (one at the very top of the address
/// space), each byte derived from its address; every other read fails.
/// Optionally fails every read from the N-th on.
struct Regions {
    regions: Vec<(u64, u64)>,
    reads: u64,
    fail_from: Option<u64>,
}

fn byte_at(a: u64) -> u8 {
    (a ^ (a >> 13) ^ (a >> 29)) as u8
}

impl Regions {
    fn readable(&self, addr: u64, len: u64) -> bool {
        let Some(end) = addr.checked_add(len) else {
            return false;
        };
        self.regions.iter().any(|&(s, e)| addr >= s && end <= e)
    }
}

impl Target for Regions {
    fn describe(&self) -> ProcessDescription {
        ProcessDescription::default()
    }
    fn read_memory(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        self.reads += 1;
        let len = buf.len() as u64;
        if self.fail_from.is_some_and(|n| self.reads >= n) || !self.readable(addr, len) {
            return Err(TargetError::Unreadable {
                addr,
                len,
                reason: "not mapped".into(),
            });
        }
        for (i, b) in buf.iter_mut().enumerate() {
            *b = byte_at(addr.wrapping_add(i as u64));
        }
        Ok(())
    }
    fn find_symbol(&mut self, _: &str) -> Result<Option<u64>, TargetError> {
        Ok(None)
    }
    fn find_function(&mut self, _: &str) -> Result<Option<u64>, TargetError> {
        Ok(None)
    }
    fn find_type(&mut self, _: &str) -> Result<Option<TypeId>, TargetError> {
        Ok(None)
    }
    fn field_offset(&mut self, _: TypeId, _: &str) -> Result<Option<u64>, TargetError> {
        Ok(None)
    }
    fn size_of(&mut self, _: TypeId) -> Result<Option<u64>, TargetError> {
        Ok(None)
    }
    fn type_sizes(&mut self) -> Result<TypeSizes, TargetError> {
        Ok(TypeSizes::LP64)
    }
    fn byte_order(&mut self) -> ByteOrder {
        ByteOrder::Little
    }
}

fn regions() -> Regions {
    Regions {
        regions: vec![
            (0x10_0000, 0x10_0000 + 5 * PAGE + 123), // ends inside a page
            (0x7fff_0000_0800, 0x7fff_0000_0800 + 40 * PAGE),
            (u64::MAX - 3 * PAGE + 1, u64::MAX), // the last pages (the very last byte is not readable)
        ],
        reads: 0,
        fail_from: None,
    }
}

/// An address near an edge of a region or of the address space.
fn interesting_addr(rng: &mut Rng, r: &Regions) -> u64 {
    let (s, e) = r.regions[rng.below(r.regions.len() as u64) as usize];
    let near = match rng.below(5) {
        0 => s,
        1 => e,
        2 => u64::MAX,
        3 => s & !(PAGE - 1),
        _ => return rng.next(),
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
            target.fail_from = Some(1 + rng.below(20));
        }
        for _ in 0..50 {
            let addr = interesting_addr(&mut rng, &target);
            let len = match rng.below(4) {
                0 => 1 + rng.below(8),
                1 => 1 + rng.below(64),
                2 => 1 + rng.below(2 * PAGE),
                _ => 1 + rng.below(3 * PAGE),
            } as usize;
            let mut buf = vec![0u8; len];
            let readable = target.readable(addr, len as u64) && target.fail_from.is_none();
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
            _ => rng.next(),
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
