//! [`DecodeError`]: why a protobuf body could not be decoded, and where.

use std::fmt;

/// Why a protobuf body could not be decoded: what was wrong, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    offset: Option<usize>,
    path: Vec<&'static str>,
    message: String,
}

impl DecodeError {
    pub(crate) fn at(offset: usize, message: String) -> Self {
        DecodeError {
            offset: Some(offset),
            path: Vec::new(),
            message,
        }
    }

    /// The error inside `name` (a field or message), for its path.
    pub(crate) fn within(mut self, name: &'static str) -> Self {
        self.path.push(name);
        self
    }

    /// The byte of the body where it went wrong, when known.
    pub fn offset(&self) -> Option<usize> {
        self.offset
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(offset) = self.offset {
            write!(f, "at byte {offset}")?;
            if !self.path.is_empty() {
                f.write_str(" ")?;
            }
        }
        if !self.path.is_empty() {
            let path: Vec<&str> = self.path.iter().rev().copied().collect();
            write!(f, "in {}", path.join("."))?;
        }
        if self.offset.is_some() || !self.path.is_empty() {
            f.write_str(": ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for DecodeError {}

impl serde::de::Error for DecodeError {
    fn custom<T: fmt::Display>(message: T) -> Self {
        DecodeError {
            offset: None,
            path: Vec::new(),
            message: message.to_string(),
        }
    }
}
