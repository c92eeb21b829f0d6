//! Measures what the CLI's target access costs on real processes: stopping,
//! opening the image (maps + ELF symbol tables), and answering the type
//! questions an MQD library asks (DWARF index build on first use, then from
//! the cache for every further process mapping the same files).
//!
//! ```text
//! cargo run --release -p mpiq-cli --example measure -- PID [PID...] [-- TYPE[.FIELD]...]
//! ```
//! Without types, Open MPI's and MPICH's usual ones are asked.

use std::time::Instant;

use mpiq::Target;
use mpiq_cli::LiveProcess;

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let split = args.iter().position(|a| a == "--").unwrap_or(args.len());
    let pids: Vec<i32> = args[..split].iter().filter_map(|a| a.parse().ok()).collect();
    let mut questions: Vec<String> = args.get(split + 1..).unwrap_or(&[]).to_vec();
    if questions.is_empty() {
        questions = [
            "ompi_communicator_t.c_name",
            "ompi_communicator_t.c_my_rank",
            "opal_list_t.opal_list_sentinel",
            "mca_pml_base_request_t.req_comm",
            "ompi_group_t",
            "MPIR_Comm.name",
            "MPIR_Request.kind",
            "MPIR_Comm_list",
        ]
        .map(String::from)
        .to_vec();
    }
    println!("rss at start: {} KiB", rss_kib());
    for pid in pids {
        let t0 = Instant::now();
        let attachment = mpiq_cli::ptrace::Attachment::attach(pid).expect("attach");
        let t_attach = t0.elapsed();
        let mut p = LiveProcess::open(pid).expect("open");
        let t_open = t0.elapsed();
        let mut answered = 0;
        for q in &questions {
            let (ty, field) = match q.rsplit_once('.') {
                Some((t, f)) => (t, Some(f)),
                None => (q.as_str(), None),
            };
            if let Some(id) = p.find_type(ty).unwrap() {
                let v = match field {
                    Some(f) => p.field_offset(id, f).unwrap(),
                    None => p.size_of(id).unwrap(),
                };
                answered += usize::from(v.is_some());
            }
        }
        let t_types = t0.elapsed();
        attachment.detach().expect("detach");
        let t_detach = t0.elapsed();
        let dies: u64 = p
            .image()
            .objects()
            .iter()
            .filter_map(|o| o.file.debug_info().ok().flatten())
            .map(|d| d.indexed().0)
            .sum();
        println!(
            "pid {pid}: stop {:.1} ms, open image ({} objects) {:.1} ms, {answered}/{} type questions {:.1} ms, \
             release {:.1} ms; DIEs indexed so far {dies}; rss {} KiB",
            t_attach.as_secs_f64() * 1e3,
            p.image().objects().len(),
            (t_open - t_attach).as_secs_f64() * 1e3,
            questions.len(),
            (t_types - t_open).as_secs_f64() * 1e3,
            (t_detach - t_types).as_secs_f64() * 1e3,
            rss_kib(),
        );
    }
}
