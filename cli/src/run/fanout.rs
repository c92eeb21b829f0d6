//! The front end's side of a job across nodes: start one collector per
//! node through the job's own launcher (srun into the job's allocation, or
//! ssh with the user's configuration), feed them the job's table, gather
//! what they send, and turn a node that did not answer into error entries
//! for its ranks (so the verdict is `unknown` there, never "no deadlock").
//!
//! With compact records ([`Plan::compact`]) the collectors wait after
//! their samples, their standard input kept open, until the front end has
//! made its analysis and names the ranks it shows whole
//! ([`Details::fetch`]) or lets them end ([`Details::close`]); srun gives
//! every collector that input (`--input=all`), ssh each its own.
//!
//! Collectors are ended when the front end is: srun and ssh get SIGTERM
//! when the front end dies ([`crate::signals::supervise_child`]), and srun then ends its
//! step, whose collectors release their ranks on that signal. A collector
//! that misses the deadline is ended the same way, by the launcher's pid.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use mpiq::{DumpOptions, ProcessSnapshot};

use super::wire::{restore, Groups, Line, Message, NodeStacks, Reassembler, Request, TABLE_END};
use super::{failed_snapshot, Reporter};

/// How the collectors reach their nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Launcher {
    /// `srun --jobid=JOB --overlap` into the job's allocation.
    Slurm {
        /// The Slurm job id.
        job: String,
    },
    /// `ssh NODE`, one per node, with the user's own configuration.
    Ssh,
}

impl Launcher {
    /// In words, for messages.
    pub fn describe(&self) -> String {
        match self {
            Launcher::Slurm { job } => format!("srun into Slurm job {job}"),
            Launcher::Ssh => "ssh".into(),
        }
    }
}

/// A node and the ranks on it (pid, world rank), as the job's table says.
#[derive(Clone, Debug)]
pub struct NodeRanks {
    /// The node's name, as in the table.
    pub node: String,
    /// Its ranks: pid and world rank.
    pub ranks: Vec<(i32, Option<i32>)>,
}

/// What the collectors are to do.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Samples, and milliseconds between them.
    pub samples: u8,
    /// Milliseconds between the samples.
    pub interval_ms: u64,
    /// How long a node may take, from the start, before it counts as lost.
    pub node_timeout: Duration,
    /// The bridge options to pass on (`--no-stacks`, `--all`, ...), sent
    /// whole as JSON: parsed once, by the front end.
    pub options: DumpOptions,
    /// Instead of a table: find the ranks of this Slurm step (`JOB.STEP`).
    pub slurm_step: Option<String>,
    /// Compact records, then the ranks shown in detail whole
    /// ([`Details`]).
    pub compact: bool,
}

/// A process a node sent: its pid and world rank.
type PidRank = (Option<u32>, Option<i32>);

/// One line from a launcher.
enum Event {
    Out(usize, String),
    Err(usize, String),
    Closed,
}

/// What one node sent.
#[derive(Debug, Default)]
struct NodeState {
    hello: Option<u32>,
    failed: Option<String>,
    done: bool,
    sampled: Vec<u64>,
    processes: Vec<(u8, ProcessSnapshot)>,
    /// Its compact records are all sent; it waits for a request.
    waiting: bool,
}

/// What the front end has received from the collectors.
#[derive(Default)]
struct Received {
    states: HashMap<String, NodeState>,
    reassembler: Reassembler,
    groups: Groups,
    stacks: NodeStacks,
    job_size: Option<i32>,
    open_streams: usize,
    /// Whole snapshots sent on request ([`Details::fetch`]), with their
    /// sample.
    details: Vec<(u8, ProcessSnapshot)>,
    /// A request was made: processes that arrive are [`Received::details`].
    asked: bool,
    /// Nodes that have sent [`Message::Waiting`] or [`Message::Done`] (a
    /// count kept as they arrive: a count over the nodes at every message
    /// would cost the square of the nodes).
    finished: usize,
    /// Nodes that have sent [`Message::Done`] after the request.
    done_after_ask: usize,
}

impl Received {
    /// One message of `node`.
    fn take(&mut self, node: String, m: Message, rep: &Reporter) {
        let st = self.states.entry(node.clone()).or_default();
        match m {
            Message::Hello { pid, ranks } => {
                rep.note(format_args!("collector on {node}: pid {pid} ({ranks} ranks)"));
                st.hello = Some(pid);
            }
            Message::Process {
                sample,
                mut process,
                states: digests,
                groups: runs,
                stacks,
            } => {
                self.stacks.fill(&node, &mut process, &stacks);
                restore(&mut process, digests, runs, &mut self.groups);
                if self.asked {
                    self.details.push((sample, *process));
                } else {
                    st.processes.push((sample, *process));
                }
            }
            Message::Stack { id, frames } => self.stacks.insert(&node, id, frames),
            Message::Sampled { sample, at_ms } => {
                rep.note(format_args!("node {node}: sample {} sent", sample + 1));
                st.sampled.push(at_ms);
            }
            Message::JobSize { size } => self.job_size = self.job_size.max(Some(size)),
            Message::Failed { error } => st.failed = Some(error),
            Message::Waiting => {
                self.finished += usize::from(!st.waiting && !st.done);
                st.waiting = true;
            }
            Message::Done => {
                self.finished += usize::from(!st.waiting && !st.done);
                self.done_after_ask += usize::from(self.asked && !st.done);
                st.done = true;
            }
        }
    }
}

/// Collectors that sent compact records and wait, each with its samples
/// whole, for the front end to name the ranks it shows whole.
pub struct Details {
    fanout: Option<Fanout>,
    rec: Received,
    /// How many collectors wait.
    waiting: usize,
}

impl Details {
    /// What `request` names ([`Request::Detail`]: ranks of the last
    /// sample; [`Request::Every`]: every rank of every sample), whole, with
    /// its sample; then the collectors end. A node that does not answer
    /// within the node timeout gives nothing (its ranks keep their compact
    /// records).
    pub fn fetch(mut self, request: Request, rep: &Reporter) -> Vec<(u8, ProcessSnapshot)> {
        let Some(mut fanout) = self.fanout.take() else {
            return Vec::new();
        };
        rep.note(format_args!(
            "asking {} node(s) for {}",
            self.waiting,
            request.line().trim_end()
        ));
        fanout.request(&request);
        self.rec.asked = true;
        let deadline = Instant::now() + fanout.plan.node_timeout;
        let waiting = self.waiting;
        fanout.pump(&mut self.rec, deadline, rep, |r| r.done_after_ask >= waiting);
        fanout.end_launchers(rep);
        rep.note(format_args!("{} rank(s) received whole", self.rec.details.len()));
        std::mem::take(&mut self.rec.details)
    }

    /// Ends the collectors without asking for anything.
    pub fn close(mut self, rep: &Reporter) {
        rep.note("no rank asked for whole: the output shows nothing the compact records leave out");
        if let Some(mut fanout) = self.fanout.take() {
            fanout.request(&Request::End);
            fanout.end_launchers(rep);
        }
    }
}

impl Drop for Details {
    fn drop(&mut self) {
        if let Some(mut fanout) = self.fanout.take() {
            fanout.request(&Request::End);
            fanout.end_launchers(&Reporter::new(false));
        }
    }
}

/// Every node's ranks, per sample.
#[derive(Debug, Default)]
pub struct Gathered {
    /// `samples[k]`: every remote rank in sample k (errors where a node did
    /// not answer), in the table's order.
    pub samples: Vec<Vec<ProcessSnapshot>>,
    /// The longest time a node took between its first and last sample.
    pub interval_ms: Option<u64>,
    /// The job size the ranks' environment gives (`--slurm`).
    pub job_size: Option<i32>,
}

/// A collector's standard input: being written (the table, by a thread
/// that hands it back), or held for a request.
type Input = Option<std::thread::JoinHandle<Option<ChildStdin>>>;

/// The running collectors.
pub struct Fanout {
    launcher: Launcher,
    nodes: Vec<NodeRanks>,
    plan: Plan,
    children: Vec<(Child, Vec<String>, Input)>,
    events: mpsc::Receiver<Event>,
    stderr: Vec<Vec<String>>,
    started: Instant,
}

/// The `mpiq` to run on the nodes: `$MPIQ_COLLECTOR`, else this one (the
/// same path on every node, as with a shared installation).
fn collector_program() -> String {
    std::env::var("MPIQ_COLLECTOR")
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| {
            std::env::current_exe()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| "mpiq".into())
        })
}

/// The collector's arguments (after the program).
fn collector_args(plan: &Plan, node: Option<&str>) -> Vec<String> {
    let mut a = vec![
        "collect".to_string(),
        "--samples".into(),
        plan.samples.to_string(),
        "--interval".into(),
        plan.interval_ms.to_string(),
        "--deadline".into(),
        plan.node_timeout.as_millis().to_string(),
    ];
    if plan.compact {
        a.push("--compact".into());
    }
    if let Some(n) = node {
        a.extend(["--node".into(), n.to_string()]);
    }
    if let Some(s) = &plan.slurm_step {
        a.extend(["--slurm-step".into(), s.clone()]);
    }
    // Serialising plain data cannot fail; an empty value is the defaults.
    a.extend([
        "--dump-options".into(),
        serde_json::to_string(&plan.options).unwrap_or_default(),
    ]);
    a
}

/// The table the collectors read: `NODE PID RANK` lines.
fn table(nodes: &[NodeRanks]) -> String {
    let mut t = String::new();
    for n in nodes {
        for (pid, rank) in &n.ranks {
            let rank = rank.map_or_else(|| "-".to_string(), |r| r.to_string());
            t.push_str(&format!("{} {pid} {rank}\n", n.node));
        }
    }
    t
}

/// Spawns a launcher whose stdout and stderr lines arrive as events; its
/// standard input gets `input` and, with `keep`, stays open (handed back by
/// the writing thread).
fn spawn(
    mut cmd: Command,
    input: Option<String>,
    keep: bool,
    index: usize,
    tx: &mpsc::Sender<Event>,
) -> std::io::Result<(Child, Input)> {
    cmd.stdin(if input.is_some() || keep {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    crate::signals::supervise_child(&mut cmd);
    let mut child = cmd.spawn()?;
    let writer = child.stdin.take().map(|mut stdin| {
        std::thread::spawn(move || {
            if let Some(text) = input {
                if stdin.write_all(text.as_bytes()).is_err() {
                    return None;
                }
            }
            keep.then_some(stdin)
        })
    });
    let out = child.stdout.take();
    let err = child.stderr.take();
    let pipe = |r: Box<dyn Read + Send>, tx: mpsc::Sender<Event>, is_err: bool| {
        std::thread::spawn(move || {
            for line in BufReader::new(r).lines().map_while(Result::ok) {
                let e = if is_err {
                    Event::Err(index, line)
                } else {
                    Event::Out(index, line)
                };
                if tx.send(e).is_err() {
                    return;
                }
            }
            let _ = tx.send(Event::Closed);
        });
    };
    if let Some(o) = out {
        pipe(Box::new(o), tx.clone(), false);
    }
    if let Some(e) = err {
        pipe(Box::new(e), tx.clone(), true);
    }
    Ok((child, writer))
}

/// The srun that starts one collector on each of `nodes` in Slurm job `job`.
fn srun_command(job: &str, nodes: &[String], plan: &Plan) -> Command {
    let mut cmd = Command::new(std::env::var("MPIQ_SRUN").unwrap_or_else(|_| "srun".into()));
    // The front end may itself run inside a step: its SLURM_* settings are
    // not the collectors'.
    for (k, _) in std::env::vars() {
        if k.starts_with("SLURM_") && k != "SLURM_CONF" {
            cmd.env_remove(k);
        }
    }
    cmd.arg(format!("--jobid={job}"))
        .arg("--overlap")
        .arg(format!("--nodelist={}", nodes.join(",")))
        .arg(format!("--nodes={}", nodes.len()))
        .arg(format!("--ntasks={}", nodes.len()))
        .args(["--ntasks-per-node=1", "--kill-on-bad-exit=0", "--quiet", "--mpi=none"])
        // Every collector reads the same input: the table, the request.
        .arg("--input=all")
        .arg("--job-name=mpiq-collect")
        .arg(collector_program())
        .args(collector_args(plan, None));
    cmd
}

/// The ssh that starts the collector of `node` (the user's own ssh
/// configuration; never a password prompt).
fn ssh_command(node: &str, plan: &Plan) -> Command {
    let mut cmd = Command::new(std::env::var("MPIQ_SSH").unwrap_or_else(|_| "ssh".into()));
    // ssh hands the remote shell one line: every word quoted for it, the
    // options' JSON among them.
    cmd.args(["-o", "BatchMode=yes", "-T", node])
        .arg(shell_quoted(&collector_program()))
        .args(collector_args(plan, Some(node)).iter().map(|a| shell_quoted(a)));
    cmd
}

/// `word` as a POSIX shell reads it back as one word: bare when it holds
/// nothing the shell treats specially, else in single quotes.
fn shell_quoted(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

impl Fanout {
    /// Starts the collectors of `nodes`.
    pub(super) fn start(launcher: Launcher, nodes: Vec<NodeRanks>, plan: Plan, rep: &Reporter) -> Fanout {
        let (tx, events) = mpsc::channel();
        let names: Vec<String> = nodes.iter().map(|n| n.node.clone()).collect();
        let input = plan.slurm_step.is_none().then(|| {
            let mut t = table(&nodes);
            if plan.compact {
                t.push_str(TABLE_END);
                t.push('\n');
            }
            t
        });
        let keep = plan.compact;
        let mut children = Vec::new();
        let mut stderr = Vec::new();
        let mut launch = |cmd: Command, input: Option<String>, covers: Vec<String>| {
            let index = stderr.len();
            match spawn(cmd, input, keep, index, &tx) {
                Ok((c, writer)) => {
                    rep.note(format_args!(
                        "collector launcher pid {} for {}",
                        c.id(),
                        covers.join(",")
                    ));
                    children.push((c, covers, writer));
                    stderr.push(Vec::new());
                }
                Err(e) => stderr.push(vec![format!("cannot start the launcher for {}: {e}", covers.join(","))]),
            }
        };
        match &launcher {
            Launcher::Slurm { job } => launch(srun_command(job, &names, &plan), input, names.clone()),
            Launcher::Ssh => {
                for n in &names {
                    launch(ssh_command(n, &plan), input.clone(), vec![n.clone()]);
                }
            }
        }
        Fanout {
            launcher,
            nodes,
            plan,
            children,
            events,
            stderr,
            started: Instant::now(),
        }
    }

    /// Waits for every node (at most the node timeout) and returns every
    /// remote rank per sample. Without compact records it ends what is still
    /// running; with them, the collectors wait in the [`Details`] returned.
    pub(super) fn finish(mut self, rep: &Reporter) -> (Gathered, Option<Details>) {
        let mut rec = Received {
            open_streams: self.children.len() * 2,
            ..Received::default()
        };
        let deadline = self.started + self.plan.node_timeout;
        let expected = self.nodes.len();
        self.pump(&mut rec, deadline, rep, |r| r.finished >= expected);
        let waiting = rec.states.values().filter(|s| s.waiting && !s.done).count();
        if waiting == 0 {
            self.end_launchers(rep);
        }
        let states = std::mem::take(&mut rec.states);
        let job_size = rec.job_size;
        let gathered = self.gather(states, job_size);
        let details = (waiting > 0).then(|| Details {
            fanout: Some(self),
            rec,
            waiting,
        });
        (gathered, details)
    }

    /// Takes the collectors' lines until `enough` holds, the deadline
    /// passes, or every stream has closed.
    fn pump(&mut self, rec: &mut Received, deadline: Instant, rep: &Reporter, enough: impl Fn(&Received) -> bool) {
        while rec.open_streams > 0 && !enough(rec) {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                rep.note("node timeout reached");
                break;
            };
            let event = match self.events.recv_timeout(left) {
                Ok(e) => e,
                Err(mpsc::RecvTimeoutError::Timeout) => continue,
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            };
            match event {
                Event::Closed => rec.open_streams -= 1,
                Event::Err(i, line) => {
                    if let Some(s) = self.stderr.get_mut(i) {
                        s.push(line);
                    }
                }
                Event::Out(i, line) => match rec.reassembler.push(&line) {
                    Line::Partial => {}
                    Line::Other(l) | Line::Bad(l) => {
                        if let Some(s) = self.stderr.get_mut(i) {
                            s.push(l);
                        }
                    }
                    Line::Message(node, m) => rec.take(node, *m, rep),
                },
            }
        }
    }
    /// Writes `request` to every collector's input and closes it.
    fn request(&mut self, request: &Request) {
        let line = request.line();
        for (_, _, input) in &mut self.children {
            if let Some(mut stdin) = input.take().and_then(|w| w.join().ok().flatten()) {
                // A collector that has ended has closed its input.
                let _ = stdin.write_all(line.as_bytes());
            }
        }
    }

    /// Ends every launcher still running (SIGTERM, then SIGKILL), by pid.
    fn end_launchers(&mut self, rep: &Reporter) {
        let mut running = Vec::new();
        for (c, _, _) in &mut self.children {
            if matches!(c.try_wait(), Ok(None)) {
                rep.note(format_args!("ending launcher pid {}", c.id()));
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(c.id() as i32),
                    nix::sys::signal::Signal::SIGTERM,
                );
                running.push(c);
            } else {
                let _ = c.wait();
            }
        }
        let until = Instant::now() + Duration::from_secs(5);
        for c in running {
            while matches!(c.try_wait(), Ok(None)) && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(20));
            }
            if matches!(c.try_wait(), Ok(None)) {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
        // Lines that arrived while the launchers ended.
        while let Ok(e) = self.events.try_recv() {
            if let Event::Err(i, line) = e {
                if let Some(s) = self.stderr.get_mut(i) {
                    s.push(line);
                }
            }
        }
    }

    /// Why `node` gave nothing for a sample, in words.
    fn why_missing(&self, node: &str, st: Option<&NodeState>, sample: u8) -> String {
        let launcher = self
            .children
            .iter()
            .position(|(_, covers, _)| covers.iter().any(|c| c == node));
        let said: Vec<&str> = launcher
            .and_then(|i| self.stderr.get(i))
            .or_else(|| self.stderr.first())
            .map(|l| {
                l.iter()
                    .map(String::as_str)
                    .filter(|l| {
                        !l.trim().is_empty() && (self.nodes.len() == 1 || !l.contains(": n") || l.contains(node))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let said = match said.len() {
            0 => String::new(),
            n => format!(" ({})", said[n.saturating_sub(3)..].join("; ")),
        };
        let timeout = self.plan.node_timeout.as_secs_f64();
        match st {
            Some(NodeState { failed: Some(e), .. }) => format!("node {node}: {e}"),
            None | Some(NodeState { hello: None, .. }) => format!(
                "node {node}: its collector did not start or did not answer within {timeout:.0} s (via {}){said}",
                self.launcher.describe()
            ),
            Some(NodeState {
                hello: Some(pid), done, ..
            }) => {
                let which = if sample == 0 { "first" } else { "second" };
                let how = if *done {
                    format!("sent no {which} sample")
                } else {
                    format!("ended, or missed the deadline, before sending the {which} sample")
                };
                format!("node {node}: its collector (pid {pid}) {how} of its ranks{said}")
            }
        }
    }

    fn gather(&self, mut states: HashMap<String, NodeState>, job_size: Option<i32>) -> Gathered {
        let samples = self.plan.samples.max(1);
        let mut out = Gathered {
            samples: vec![Vec::new(); samples as usize],
            interval_ms: None,
            job_size,
        };
        for st in states.values() {
            if let (Some(a), Some(b)) = (st.sampled.first(), st.sampled.last()) {
                if st.sampled.len() > 1 {
                    out.interval_ms = out.interval_ms.max(Some(b - a));
                }
            }
        }
        // Every rank some sample of a node gave: (pid, rank) by node, each
        // once, in the order they came (a set beside it: 100,000 ranks).
        let mut seen: HashMap<String, Vec<PidRank>> = HashMap::new();
        for (node, st) in &states {
            let mut once = std::collections::HashSet::new();
            let list = seen.entry(node.clone()).or_default();
            for (_, p) in &st.processes {
                if once.insert((p.pid, p.world_rank)) {
                    list.push((p.pid, p.world_rank));
                }
            }
        }
        for n in &self.nodes {
            let mut st = states.remove(&n.node);
            for k in 0..samples {
                let mut got: Vec<ProcessSnapshot> = st
                    .as_mut()
                    .map(|s| {
                        let (these, rest) = std::mem::take(&mut s.processes)
                            .into_iter()
                            .partition(|(sample, _)| *sample == k);
                        s.processes = rest;
                        these.into_iter().map(|(_, p)| p).collect()
                    })
                    .unwrap_or_default();
                if self.plan.slurm_step.is_some() {
                    // No table: what the node found; else its ranks as
                    // another sample found them, or one entry saying that
                    // nothing came from it.
                    if got.is_empty() {
                        let why = self.why_missing(&n.node, st.as_ref(), k);
                        let mut known: Vec<PidRank> = seen.get(&n.node).cloned().unwrap_or_default();
                        if known.is_empty() {
                            known.push((None, None));
                        }
                        for (pid, rank) in known {
                            let mut p = failed_snapshot(pid, rank, String::new(), why.clone());
                            p.node = Some(n.node.clone());
                            got.push(p);
                        }
                    }
                    out.samples[k as usize].extend(got);
                    continue;
                }
                for &(pid, rank) in &n.ranks {
                    let i = got.iter().position(|p| p.pid == u32::try_from(pid).ok());
                    let p = match i {
                        Some(i) => got.swap_remove(i),
                        None => {
                            let mut p = failed_snapshot(
                                u32::try_from(pid).ok().filter(|&p| p > 0),
                                rank,
                                String::new(),
                                self.why_missing(&n.node, st.as_ref(), k),
                            );
                            p.node = Some(n.node.clone());
                            p
                        }
                    };
                    out.samples[k as usize].push(p);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_and_the_collectors_command_line() {
        let nodes = vec![
            NodeRanks {
                node: "n1".into(),
                ranks: vec![(10, Some(0)), (11, None)],
            },
            NodeRanks {
                node: "n2".into(),
                ranks: vec![(20, Some(2))],
            },
        ];
        assert_eq!(table(&nodes), "n1 10 0\nn1 11 -\nn2 20 2\n");
        let plan = Plan {
            samples: 2,
            interval_ms: 500,
            node_timeout: Duration::from_secs(30),
            options: DumpOptions {
                no_stacks: true,
                ..DumpOptions::default()
            },
            slurm_step: None,
            compact: true,
        };
        let cmd = srun_command("42", &["n1".into(), "n2".into()], &plan);
        let args: Vec<String> = cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        let line = args.join(" ");
        assert!(
            line.starts_with("--jobid=42 --overlap --nodelist=n1,n2 --nodes=2 --ntasks=2 --ntasks-per-node=1"),
            "{line}"
        );
        assert!(
            line.ends_with("--input=all --job-name=mpiq-collect")
                || line.contains("--input=all --job-name=mpiq-collect "),
            "{line}"
        );
        // The options go to the collectors as one typed value, never as words parsed again.
        let sent = |args: &[String]| -> DumpOptions {
            let at = args.iter().position(|a| a == "--dump-options").expect("--dump-options");
            serde_json::from_str(&args[at + 1]).expect("the options as JSON")
        };
        assert!(
            line.contains(" collect --samples 2 --interval 500 --deadline 30000 --compact --dump-options {"),
            "{line}"
        );
        assert_eq!(sent(&args), plan.options, "{line}");
        let ssh: Vec<String> = ssh_command("n7", &plan)
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let line = ssh.join(" ");
        assert!(line.starts_with("-o BatchMode=yes -T n7 "), "{line}");
        assert!(
            line.contains(" collect --samples 2 --interval 500 --deadline 30000 --compact --node n7 --dump-options "),
            "{line}"
        );
        // One word for the remote shell: the JSON shell-quoted.
        let quoted = ssh.last().expect("the remote command");
        assert!(quoted.starts_with("'{") && quoted.ends_with("}'"), "{quoted}");
        let unquoted = std::process::Command::new("sh")
            .args(["-c", &format!("printf %s {quoted}")])
            .output()
            .expect("sh");
        let back: DumpOptions = serde_json::from_slice(&unquoted.stdout).expect("the options as JSON");
        assert_eq!(back, plan.options);
    }
}
