//! `mpiq`: show the MPI message queues of hung MPI programs (live ranks,
//! core files, whole jobs) and whether they are deadlocked. Everything but
//! argument parsing and the exit status lives in the `mpiq_cli` library.

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use mpiq_cli::args::{Cli, Command};
use mpiq_cli::run::RunError;

/// Runs the command and prints its output; returns the exit status.
fn real_main(cli: &Cli) -> anyhow::Result<u8> {
    mpiq_cli::signals::install().map_err(|e| anyhow::anyhow!("cannot install the signal handling: {e}"))?;
    let out = mpiq_cli::dispatch::run(cli)?;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(out.stdout.as_bytes()).and_then(|()| stdout.flush()) {
        // `mpiq ... | head` is not an error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(out.exit_code()),
        r => r.map(|()| out.exit_code()).map_err(Into::into),
    }
}

fn main() -> ExitCode {
    // clap exits with 2 on a usage error and 0 for --help / --version.
    let cli = Cli::parse();
    // mpiq run's watchdog handles no signals: only its pipe ends it.
    if let Command::RunWatchdog { job, start, grace_ms } = cli.command {
        return ExitCode::from(mpiq_cli::launch::watchdog_main(
            job,
            start,
            std::time::Duration::from_millis(grace_ms),
        ));
    }
    // The PMIx helper neither: a SIGTERM or SIGKILL from its parent ends it.
    if let Command::PmixProctable {
        pid,
        library,
        tmpdir,
        rendezvous,
    } = cli.command
    {
        mpiq_cli::pmix::helper_main(&mpiq_cli::pmix::HelperRequest {
            pid,
            library,
            tmpdir,
            rendezvous,
        });
    }
    match real_main(&cli) {
        // 0, or 3 / 4 for a deadlock / an inconclusive analysis.
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            let code = e.downcast_ref::<RunError>().map_or(1, RunError::exit_code);
            eprintln!("mpiq: {e}");
            ExitCode::from(code)
        }
    }
}
