//! The kinds of model a file of this format holds, and the header byte of each.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Which model a file holds; both kinds share the header and checksum scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FileKind {
    /// A weight-shared model ([`SharedModelData`](super::SharedModelData)).
    Shared,
    /// A plain BNN baseline ([`FullBnnData`](super::FullBnnData)).
    FullBnn,
}

impl FileKind {
    pub(crate) fn to_byte(self) -> u8 {
        match self {
            FileKind::Shared => 0,
            FileKind::FullBnn => 1,
        }
    }

    /// The kind of header byte `b`, `None` for a byte no kind has.
    pub(crate) fn from_byte(b: u8) -> Option<Self> {
        match b {
            0 => Some(FileKind::Shared),
            1 => Some(FileKind::FullBnn),
            _ => None,
        }
    }
}

impl fmt::Display for FileKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FileKind::Shared => "weight-shared (.swb)",
            FileKind::FullBnn => "full BNN",
        })
    }
}
