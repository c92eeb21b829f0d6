//! The dispatcher: picks the command a parsed command line names and runs
//! it. It sits on top of the commands (`launch`, `lookup`, `watch`, the
//! ones of [`crate::run`]) and nothing but `main.rs` uses it.

use std::time::Duration;

use mpiq::{DumpOptions, UsageError};

use crate::args::{Cli, CollectMode, Command, DumpArgs, OutputFormat, SetupDebugger};
use crate::core::CoreProcess;
use crate::handoff::Reopen;
use crate::live::LiveProcess;
use crate::report::{self, Samples};
use crate::run::{
    finish, run_collector, run_core, run_job_settled, run_queues, run_replay, run_stacks, test_hold, CollectRequest,
    Fetch, JobPlan, JobSource, Outcome, Reporter, RunError,
};
use crate::{flamegraph, launch, lookup, pmix, watch};

/// Runs a parsed command line.
pub fn run(cli: &Cli) -> Result<Outcome, RunError> {
    let rep = Reporter::new(cli.verbose);
    let one = |current| Samples {
        current,
        ..Samples::default()
    };
    let dump_command = |dump: &DumpArgs| -> Result<DumpOptions, RunError> {
        let opts = dump.to_options()?;
        if dump.svg.is_some() {
            // Before any process is stopped.
            report::check_dot()?;
        }
        if let Some(path) = &dump.flamegraph {
            flamegraph::check_path(path)?;
        }
        if let Some(path) = &dump.html {
            crate::html::check_path(path)?;
        }
        Ok(opts)
    };
    match &cli.command {
        Command::Queues { pids, dump } => {
            let opts = dump_command(dump)?;
            let snapshot = run_queues(pids, &opts, &rep)?;
            finish(one(snapshot), false, dump, &opts, Reopen::Live(None), None)
        }
        Command::Core { files, exe, dump } => {
            let opts = dump_command(dump)?;
            let snapshot = run_core(files, exe.as_deref(), &opts, &rep)?;
            finish(
                one(snapshot),
                false,
                dump,
                &opts,
                Reopen::Cores(files, exe.as_deref()),
                None,
            )
        }
        Command::Job {
            starter,
            slurm,
            node_timeout,
            samples,
            interval,
            collect,
            dump,
        } => {
            let opts = dump_command(dump)?;
            // Every rank whole where every rank is shown.
            let shows_all = dump.output_format()? == OutputFormat::Json || opts.all || dump.no_analysis;
            let compact = collect.map_or(!shows_all, |c| c != CollectMode::Whole);
            let source = match (starter, slurm) {
                (_, Some(spec)) => JobSource::Slurm(spec.clone()),
                (Some(pid), None) => JobSource::Starter(*pid),
                (None, None) => return Err(UsageError("give --starter PID or --slurm JOB[.STEP]".into()).into()),
            };
            let plan = JobPlan {
                samples: *samples,
                interval_ms: *interval,
                node_timeout: Duration::from_secs(*node_timeout),
                compact,
            };
            // A job given by its Slurm id: other nodes through srun into it.
            let slurm_job = slurm.as_deref().and_then(|s| s.split('.').next());
            let (samples, details) = run_job_settled(&source, &plan, &opts, &rep)?;
            finish(
                samples,
                true,
                dump,
                &opts,
                Reopen::Live(slurm_job),
                details.map(|details| Fetch {
                    details,
                    rep: &rep,
                    check: *collect == Some(CollectMode::Check),
                }),
            )
        }
        Command::Collect {
            node,
            slurm_step,
            samples,
            interval,
            deadline,
            compact,
            dump_options,
        } => run_collector(
            &CollectRequest {
                node: node.as_deref(),
                slurm_step: slurm_step.as_deref(),
                samples: *samples,
                interval_ms: *interval,
                deadline_ms: *deadline,
                compact: *compact,
            },
            &match dump_options {
                Some(json) => serde_json::from_str(json)
                    .map_err(|e| UsageError(format!("--dump-options: not the options' JSON: {e}")))?,
                None => DumpOptions::default(),
            },
            &rep,
        ),
        Command::Replay { file, dump } => {
            let opts = dump_command(dump)?;
            finish(one(run_replay(file, &opts)?), false, dump, &opts, Reopen::No, None)
        }
        Command::Watch(args) => watch::run(args),
        Command::Setup { debugger } => {
            let found = crate::handoff::debuggers(&crate::handoff::Environment::current());
            let (name, lines) = match debugger {
                SetupDebugger::Gdb => ("gdb", crate::handoff::gdb_setup(&found)),
                SetupDebugger::Lldb => ("lldb", crate::handoff::lldb_setup(&found)),
                SetupDebugger::Recorder => (
                    "the recorder",
                    crate::handoff::recorder_setup(&crate::handoff::Environment::current()),
                ),
            };
            let (stdout, status) = match lines {
                Ok(lines) => (lines, None),
                Err(why) => {
                    eprintln!("mpiq: cannot set up {name}: {why}");
                    (String::new(), Some(1))
                }
            };
            Ok(Outcome {
                stdout,
                verdict: None,
                status,
            })
        }
        Command::Stacks { pids, cores, exe, json } => run_stacks(pids, cores, exe.as_deref(), *json, &rep),
        Command::Lookup { pid, core, questions } => {
            let questions = questions.to_lookup()?;
            let stdout = if let Some(core) = core {
                let mut p = CoreProcess::open_core(core, None)?;
                lookup::run_lookup(&mut p, &questions)?
            } else {
                let pid = pid.unwrap_or_default();
                let mut p = LiveProcess::attach(pid).map_err(|e| RunError::NothingOpened(e.to_string()))?;
                rep.note("stopped");
                test_hold();
                let out = lookup::run_lookup(&mut p, &questions);
                rep.note("answered");
                if let Err(e) = p.detach() {
                    eprintln!("mpiq: warning: {e}");
                }
                out?
            };
            Ok(Outcome {
                stdout,
                verdict: None,
                status: None,
            })
        }
        Command::Run(args) => Ok(Outcome {
            stdout: String::new(),
            verdict: None,
            status: Some(launch::run(args, cli.verbose)),
        }),
        Command::PmixProctable {
            pid,
            library,
            tmpdir,
            rendezvous,
        } => pmix::helper_main(&pmix::HelperRequest {
            pid: *pid,
            library: library.clone(),
            tmpdir: tmpdir.clone(),
            rendezvous: rendezvous.clone(),
        }),
        Command::RunWatchdog { job, start, grace_ms } => Ok(Outcome {
            stdout: String::new(),
            verdict: None,
            status: Some(launch::watchdog_main(*job, *start, Duration::from_millis(*grace_ms))),
        }),
    }
}
