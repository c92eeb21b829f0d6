//! Writing a recording of a whole session (`mpiq watch --record FILE`) as
//! it goes: one file of the usual format ([`super::record`],
//! `mpiq.recording/2`, gzip JSON) whose `samples` hold every sample in
//! order and whose `processes` are the first one, so that `mpiq replay FILE`
//! and everything else that reads one dump reads it unchanged.
//!
//! Rewriting the whole file for each sample would cost the whole session
//! every time; instead the file is one gzip member whose deflate stream is
//! made of independent pieces, each ended by a sync flush (byte-aligned,
//! not final): the header and the first sample, then `,` and each further
//! sample, and last the tail `],"processes":FIRST}` in a final block, the
//! CRC-32 and the length. Adding a sample writes over the old tail only:
//! the new sample's piece, the tail again (compressed once, with the first
//! sample), the new CRC (combined, never recomputed) and length. So each
//! sample is compressed once, at the fastest level (a sample of 128 ranks
//! is some 200 MB of JSON, mostly the hex of the memory read). The file is
//! complete after every sample, so a session that is killed keeps every
//! sample written before (save one being written at that very moment).

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use flate2::write::DeflateEncoder;
use flate2::Compression;

use super::record::{RecordedSample, Recording, RecordingError, RECORDING_SCHEMA};

/// The gzip header: deflate, no name, no time, OS unknown.
const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];

/// A session recording being written.
pub struct SessionWriter {
    path: PathBuf,
    file: File,
    /// Where the tail starts: the end of the last sample's piece.
    body_end: u64,
    /// The CRC-32 of the uncompressed text up to the tail.
    crc: crc32fast::Hasher,
    /// Its length.
    len: u64,
    /// The tail, compressed, with its CRC-32 and length (from the first
    /// sample on).
    tail: Option<(Vec<u8>, crc32fast::Hasher, u64)>,
    samples: usize,
}

/// One independent piece of the deflate stream, written through: its
/// text's CRC-32 and length are counted as it goes, so a sample's JSON
/// (hundreds of MB for many ranks) is never held whole.
struct Piece {
    enc: DeflateEncoder<Vec<u8>>,
    crc: crc32fast::Hasher,
    len: u64,
}

impl Piece {
    fn new() -> Piece {
        Piece {
            enc: DeflateEncoder::new(Vec::new(), Compression::fast()),
            crc: crc32fast::Hasher::new(),
            len: 0,
        }
    }

    /// The compressed bytes: ended by a sync flush (byte-aligned, in a
    /// block that is not the last), or final.
    ///
    /// One sync flush is not always all of it: miniz_oxide, flate2's
    /// backend, can stop short of the end of a flush whose output did not
    /// fit its buffer, the sync marker (an empty stored block, `00 00 FF
    /// FF`) left out (miniz_oxide#105; fastly/pushpin#48307), and the next
    /// piece then follows a block cut in the middle: CI's `watch_mpich`
    /// read its session recording back as "corrupt deflate stream". So it
    /// flushes again until a flush adds only another empty stored block
    /// (5 bytes at most, harmless) and the output ends with the marker.
    fn finish(mut self, last: bool) -> std::io::Result<(Vec<u8>, crc32fast::Hasher, u64)> {
        if last {
            return Ok((self.enc.finish()?, self.crc, self.len));
        }
        const MARKER: [u8; 4] = [0, 0, 0xff, 0xff];
        let mut flushes = 0;
        loop {
            let before = self.enc.get_ref().len();
            self.enc.flush()?;
            flushes += 1;
            let out = self.enc.get_ref();
            if flushes >= 2 && out.len() - before <= 5 && out.ends_with(&MARKER) {
                break;
            }
            if flushes > 64 {
                return Err(std::io::Error::other("the compressor did not finish its sync flush"));
            }
        }
        // What dropping the encoder adds after the flush goes nowhere.
        Ok((std::mem::take(self.enc.get_mut()), self.crc, self.len))
    }
}

impl Write for Piece {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.enc.write(buf)?;
        self.crc.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.enc.flush()
    }
}

/// `prefix`, the processes as JSON, `suffix`: one piece.
fn piece(
    prefix: &str,
    processes: &[Recording],
    suffix: &str,
    last: bool,
) -> std::io::Result<(Vec<u8>, crc32fast::Hasher, u64)> {
    let mut p = Piece::new();
    p.write_all(prefix.as_bytes())?;
    serde_json::to_writer(&mut p, processes)?;
    p.write_all(suffix.as_bytes())?;
    p.finish(last)
}

impl SessionWriter {
    /// Creates (or truncates) `path`; nothing is written before the first
    /// sample.
    pub fn create(path: &Path) -> Result<Self, RecordingError> {
        let file = File::create(path).map_err(|source| RecordingError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Ok(SessionWriter {
            path: path.to_path_buf(),
            file,
            body_end: 0,
            crc: crc32fast::Hasher::new(),
            len: 0,
            tail: None,
            samples: 0,
        })
    }

    /// How many samples the file holds.
    pub fn samples(&self) -> usize {
        self.samples
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Adds a sample taken at `time_ms` (milliseconds since the Unix
    /// epoch): the file then holds it as its last sample (and the first as
    /// its `processes`).
    pub fn add(&mut self, time_ms: u64, processes: &[Recording]) -> Result<(), RecordingError> {
        let mut prefix = String::new();
        if self.samples == 0 {
            let head = serde_json::json!({
                "schema": RECORDING_SCHEMA,
                "mpiq_version": env!("CARGO_PKG_VERSION"),
            })
            .to_string();
            // `{"schema":...,"mpiq_version":...` and the list opened.
            prefix.push_str(head.strip_suffix('}').unwrap_or(&head));
            prefix.push_str(",\"samples\":[");
        } else {
            prefix.push(',');
        }
        prefix.push_str(&format!("{{\"time_ms\":{time_ms},\"processes\":"));
        let written = self.write(&prefix, processes);
        written.map_err(|source| RecordingError::Io {
            path: self.path.display().to_string(),
            source,
        })?;
        self.samples += 1;
        Ok(())
    }

    fn write(&mut self, prefix: &str, processes: &[Recording]) -> std::io::Result<()> {
        if self.tail.is_none() {
            self.tail = Some(piece("],\"processes\":", processes, "}", true)?);
        }
        let Some((tail, tail_crc, tail_len)) = &self.tail else {
            return Ok(());
        };
        let (body, body_crc, body_len) = piece(prefix, processes, "}", false)?;
        let mut out = Vec::with_capacity(body.len() + tail.len() + 18);
        if self.samples == 0 {
            out.extend_from_slice(&GZIP_HEADER);
        }
        out.extend_from_slice(&body);
        let written = out.len() as u64;
        out.extend_from_slice(tail);
        let mut crc = self.crc.clone();
        crc.combine(&body_crc);
        let mut whole = crc.clone();
        whole.combine(tail_crc);
        let len = self.len + body_len;
        out.extend_from_slice(&whole.finalize().to_le_bytes());
        // ISIZE: the length modulo 2^32.
        out.extend_from_slice(&((len + tail_len) as u32).to_le_bytes());
        // Over the old tail, in one write (the file only grows: the same
        // tail follows a longer text).
        self.file.seek(SeekFrom::Start(self.body_end))?;
        self.file.write_all(&out)?;
        self.file.flush()?;
        self.body_end += written;
        self.crc = crc;
        self.len = len;
        Ok(())
    }
}

impl RecordedSample {
    /// The samples of a recording: its `samples`, or its `processes` as the
    /// one sample of a recording of one dump (time 0: unknown).
    pub fn all_of(file: super::record::RecordingFile) -> Vec<RecordedSample> {
        if file.samples.is_empty() {
            vec![RecordedSample {
                time_ms: 0,
                processes: file.processes,
            }]
        } else {
            file.samples
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::record::RecordingFile;
    use super::*;
    use crate::target::ProcessDescription;

    fn rec(pid: u32, symbol: &str) -> Recording {
        let mut r = Recording {
            process: ProcessDescription {
                pid: Some(pid),
                executable: "/bin/ring".into(),
            },
            world_rank: Some(pid as i32 - 100),
            ..Recording::default()
        };
        r.symbols.insert(symbol.into(), Some(u64::from(pid) * 4096));
        r
    }

    #[test]
    fn every_sample_in_order_and_the_first_as_processes() {
        let dir = std::env::temp_dir().join(format!("mpiq-session-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.rec");
        let mut w = SessionWriter::create(&path).unwrap();
        let mut expected = Vec::new();
        for i in 0..5u64 {
            // Samples of different sizes.
            let procs: Vec<Recording> = (0..(5 - i) as u32)
                .map(|p| rec(100 + p, &format!("sym{i}-{}", "x".repeat(p as usize * 50))))
                .collect();
            w.add(1_000 + i, &procs).unwrap();
            expected.push(RecordedSample {
                time_ms: 1_000 + i,
                processes: procs.clone(),
            });
            // Complete after every sample, read by the one loader.
            let f = RecordingFile::load(&path).unwrap();
            assert_eq!(f.schema, RECORDING_SCHEMA);
            assert_eq!(f.samples, expected);
            assert_eq!(f.processes, expected[0].processes);
        }
        assert_eq!(w.samples(), 5);
        // Plain gzip: any reader takes it (one member).
        let raw = std::fs::read(&path).unwrap();
        let mut text = String::new();
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&raw[..]), &mut text).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["samples"].as_array().unwrap().len(), 5);
        let all = RecordedSample::all_of(RecordingFile::load(&path).unwrap());
        assert_eq!(all, expected);
        // A recording of one dump is one sample.
        let one = RecordingFile {
            schema: RECORDING_SCHEMA.into(),
            mpiq_version: "t".into(),
            processes: vec![rec(7, "a")],
            samples: Vec::new(),
        };
        let text = serde_json::to_string(&one).unwrap();
        assert!(!text.contains("samples"), "{text}");
        let all = RecordedSample::all_of(serde_json::from_str(&text).unwrap());
        assert_eq!((all.len(), all[0].time_ms), (1, 0));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Pieces of every size around the compressor's buffers, of text that
    /// compresses badly (as the hex of memory reads does not, but a sample's
    /// mix can), each ended by [`Piece::finish`]: their concatenation, the
    /// last final, is one deflate stream that decodes to the whole text.
    #[test]
    fn pieces_of_any_size_make_one_stream() {
        use std::io::Read;
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut stream = Vec::new();
        let mut text = Vec::new();
        let sizes = [
            0usize,
            1,
            5,
            1000,
            32_767,
            32_768,
            32_769,
            65_536,
            100_000,
            262_145,
            1 << 20,
        ];
        for (i, &n) in sizes.iter().enumerate() {
            const ALPHA: &[u8] = b"0123456789abcdef\"{},:";
            let part: Vec<u8> = (0..n).map(|_| ALPHA[(next() % ALPHA.len() as u64) as usize]).collect();
            let mut p = Piece::new();
            p.write_all(&part).unwrap();
            let (bytes, _, len) = p.finish(i + 1 == sizes.len()).unwrap();
            assert_eq!(len as usize, n);
            if i + 1 < sizes.len() {
                assert!(
                    bytes.ends_with(&[0, 0, 0xff, 0xff]),
                    "piece {i} ({n} bytes) ends without the marker"
                );
            }
            stream.extend_from_slice(&bytes);
            text.extend_from_slice(&part);
        }
        let mut back = Vec::new();
        flate2::read::DeflateDecoder::new(&stream[..])
            .read_to_end(&mut back)
            .unwrap();
        assert!(back == text, "{} bytes back of {}", back.len(), text.len());
    }
}
