//! [`Failure`]: what went wrong in a command of any face, with its exit code (2 for
//! bad input or usage, 1 for a refusal or trouble, 0 when the output's reader left).
//! The faces, the engine and the backends share it; it depends on none of them.

use crate::load::InputError;
use crate::out::WriteFailure;
use crate::record::RecordError;

/// A failure with its exit code.
#[derive(Debug)]
pub enum Failure {
    /// Bad input (exit 2).
    Input(InputError),
    /// Bad usage (exit 2).
    Usage(String),
    /// The answer is no: refused, in use (exit 1).
    No(String),
    /// The state file (exit 2 when it is unusable, 1 when it is busy).
    Record(RecordError),
    /// Writing the output failed (exit 1), or its reader left (exit 0, quietly).
    Write(WriteFailure),
}

impl Failure {
    pub fn exit_code(&self) -> u8 {
        match self {
            Failure::Input(_) | Failure::Usage(_) => 2,
            Failure::No(_) => 1,
            Failure::Record(RecordError::InUse { .. } | RecordError::Locked { .. }) => 1,
            Failure::Record(_) => 2,
            Failure::Write(WriteFailure::Closed) => 0,
            Failure::Write(WriteFailure::Failed(_)) => 1,
        }
    }

    /// Whether to say nothing (the reader of the output went away).
    pub fn quiet(&self) -> bool {
        matches!(self, Failure::Write(WriteFailure::Closed))
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Input(e) => write!(f, "{e}"),
            Failure::Usage(m) | Failure::No(m) => f.write_str(m),
            Failure::Record(e) => write!(f, "{e}"),
            Failure::Write(WriteFailure::Closed) => f.write_str("output closed"),
            Failure::Write(WriteFailure::Failed(e)) => write!(f, "cannot write the output: {e}"),
        }
    }
}

impl From<InputError> for Failure {
    fn from(e: InputError) -> Self {
        Failure::Input(e)
    }
}

impl From<RecordError> for Failure {
    fn from(e: RecordError) -> Self {
        Failure::Record(e)
    }
}

impl From<WriteFailure> for Failure {
    fn from(e: WriteFailure) -> Self {
        Failure::Write(e)
    }
}

/// A backend that could not open its world: bad options are a usage error (exit 2),
/// a world that refuses or does not answer is a no (exit 1).
impl From<maar_scheduler::kit::OpenError> for Failure {
    fn from(e: maar_scheduler::kit::OpenError) -> Self {
        match e {
            maar_scheduler::kit::OpenError::Usage(m) => Failure::Usage(m),
            maar_scheduler::kit::OpenError::No(m) => Failure::No(m),
        }
    }
}

/// A Kubernetes error as the command line reports it: a bad kubeconfig or context is
/// a usage error (exit 2), a cluster that does not answer or refuses is a no (exit 1).
pub fn kube_failure(e: maar_kube::KubeError) -> Failure {
    if e.is_usage() {
        Failure::Usage(e.to_string())
    } else {
        Failure::No(e.to_string())
    }
}
