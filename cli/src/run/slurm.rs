//! `mpiq job --slurm JOB[.STEP]`: which step of a Slurm job holds the
//! ranks, and on which nodes it runs, as Slurm's own commands say
//! (`squeue`, `scontrol`).

use std::process::{Command, Stdio};

/// A Slurm job step and its nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlurmStep {
    /// The job id.
    pub job: String,
    /// The step id.
    pub step: String,
    /// The nodes the step runs on.
    pub nodes: Vec<String>,
}

/// Why a Slurm job could not be resolved.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SlurmError {
    /// `--slurm` was not `JOB` or `JOB.STEP`.
    #[error("--slurm wants JOB or JOB.STEP (numbers, as squeue shows them), not '{0}'")]
    Spec(String),
    /// A Slurm command could not be run or failed.
    #[error("`{command}` failed: {why}")]
    Command {
        /// The command line.
        command: String,
        /// Its error output or exit status.
        why: String,
    },
    /// The job has no step that could hold MPI ranks.
    #[error("Slurm job {0} has no running job step (is it still pending, or were its ranks started by mpirun outside srun? then use --starter with mpirun's pid)")]
    NoStep(String),
    /// Several steps: the user must say which.
    #[error("Slurm job {job} has several running steps ({steps}): say which with --slurm {job}.STEP")]
    Ambiguous {
        /// The job.
        job: String,
        /// The steps and their nodes.
        steps: String,
    },
}

fn slurm_command(program: &str, args: &[&str]) -> Result<String, SlurmError> {
    let command = format!("{program} {}", args.join(" "));
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| SlurmError::Command {
            command: command.clone(),
            why: if e.kind() == std::io::ErrorKind::NotFound {
                format!("{program} is not installed (or not on PATH): is this a Slurm cluster's node?")
            } else {
                e.to_string()
            },
        })?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
        return Err(SlurmError::Command {
            command,
            why: if err.is_empty() { out.status.to_string() } else { err },
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Parses `JOB` or `JOB.STEP`.
fn parse_spec(spec: &str) -> Result<(String, Option<String>), SlurmError> {
    let bad = || SlurmError::Spec(spec.to_string());
    let (job, step) = match spec.split_once('.') {
        Some((j, s)) => (j, Some(s)),
        None => (spec, None),
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(job) || step.is_some_and(|s| !digits(s)) {
        return Err(bad());
    }
    Ok((job.to_string(), step.map(str::to_string)))
}

/// The node names of a Slurm host list (`n[1-4],m7`), as Slurm expands it.
pub fn expand_hostlist(list: &str) -> Result<Vec<String>, SlurmError> {
    if !list.contains('[') {
        return Ok(list.split(',').filter(|s| !s.is_empty()).map(str::to_string).collect());
    }
    Ok(slurm_command("scontrol", &["show", "hostnames", list])?
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect())
}

/// The running steps of a job that can hold ranks (not `batch`, `extern`
/// or `interactive`), with their node lists, from `squeue --steps`.
fn running_steps(text: &str, job: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| {
            let (id, nodes) = l.trim().split_once('|')?;
            let (j, s) = id.split_once('.')?;
            (j == job && s.bytes().all(|b| b.is_ascii_digit()) && !s.is_empty())
                .then(|| (s.to_string(), nodes.trim().to_string()))
        })
        .collect()
}

/// The step `spec` names (the job's only running step when it names none)
/// and its nodes.
pub fn resolve(spec: &str) -> Result<SlurmStep, SlurmError> {
    let (job, step) = parse_spec(spec)?;
    let listed = slurm_command(
        "squeue",
        &["--noheader", "--steps", "--jobs", &job, "--format", "%i|%N"],
    )?;
    let steps = running_steps(&listed, &job);
    let (step, nodes) = match step {
        Some(s) => match steps.iter().find(|(id, _)| *id == s) {
            Some(found) => found.clone(),
            None => return Err(SlurmError::NoStep(format!("{job}.{s}"))),
        },
        None => match steps.as_slice() {
            [] => return Err(SlurmError::NoStep(job)),
            [one] => one.clone(),
            many => {
                return Err(SlurmError::Ambiguous {
                    job: job.clone(),
                    steps: many
                        .iter()
                        .map(|(s, n)| format!("{job}.{s} on {n}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                })
            }
        },
    };
    Ok(SlurmStep {
        job,
        step,
        nodes: expand_hostlist(&nodes)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs() {
        assert_eq!(parse_spec("12").unwrap(), ("12".into(), None));
        assert_eq!(parse_spec("12.3").unwrap(), ("12".into(), Some("3".into())));
        for bad in ["", "x", "12.", "12.batch", "1 2"] {
            assert!(parse_spec(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn steps_that_hold_ranks() {
        let text = "7.0|n[1-4]\n7.extern|n[1-4]\n7.batch|n1\n8.0|n5\n7.2|n1\n";
        assert_eq!(
            running_steps(text, "7"),
            vec![("0".into(), "n[1-4]".into()), ("2".into(), "n1".into())]
        );
        assert_eq!(expand_hostlist("a,b").unwrap(), vec!["a", "b"]);
    }
}
