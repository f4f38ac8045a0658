//! How a run of the demo ends badly.
#![allow(dead_code, unreachable_pub)]

/// How a run ended badly.
#[derive(Debug)]
pub enum Failure {
    /// What went wrong, for the user.
    Error(String),
    /// Ctrl-C or SIGTERM: the replicas were shut down gracefully.
    Interrupted,
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Failure::Error(message)
    }
}

impl From<&str> for Failure {
    fn from(message: &str) -> Self {
        Failure::Error(message.to_owned())
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Error(message) => f.write_str(message),
            Failure::Interrupted => f.write_str("interrupted"),
        }
    }
}
