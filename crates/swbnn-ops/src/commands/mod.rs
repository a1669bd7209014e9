//! The commands as library calls: one request type and one function per command, shared by
//! the `swbnn` command line and the Python package, which only parse arguments, call these
//! and print. Each request is checked in full before any data is read or anything written.
//!
//! ```no_run
//! use swbnn_ops::commands::{TrainKind, TrainRequest, train};
//! let device = bnn_layers::device_by_name("flex")?;
//! let request = TrainRequest::new(
//!     "npz:my-data.npz".parse()?,
//!     "mlp".parse()?,
//!     TrainKind::Deterministic,
//!     "runs/det".into(),
//! );
//! let history = train(&request, &device, &mut bnn_train::Silent)?;
//! println!("{} epochs", history.len());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod calibrate;
mod compress;
mod eval;
mod export;
mod train;

pub use calibrate::{CalibrateOutcome, CalibrateRequest, calibrate};
pub use compress::{CompressRequest, CompressSettings, compress, compress_auto, search_file};
pub use eval::{
    ConformalEvaluation, EvalOutcome, EvalRequest, RegressionEvaluation, Scaling, eval,
};
pub use export::{ExportRequest, Exported, export};
pub use train::{TrainKind, TrainRequest, train};

use crate::Error;

/// One line for a finished epoch, as the command line and the Python package print it.
pub fn epoch_line(s: &bnn_train::EpochStats) -> String {
    let fit = match s.rmse {
        Some(rmse) => format!("train rmse {rmse:.4} (standardised)"),
        None => format!("train acc {:.4}", s.accuracy),
    };
    let unit = if s.rmse.is_some() { "rows" } else { "img" };
    format!(
        "epoch {}: loss {:.4} nll {:.4} kl {:.1} {fit} ({:.0} {unit}/s, {:.0} s)",
        s.epoch + 1,
        s.loss,
        s.nll,
        s.kl,
        s.images_per_s,
        s.seconds
    )
}

/// `Err(Error::Usage)` naming `what` unless `ok`.
fn require(ok: bool, what: impl FnOnce() -> String) -> Result<(), Error> {
    match ok {
        true => Ok(()),
        false => Err(Error::Usage(what())),
    }
}

/// Wraps an error with the flag or file it concerns.
fn within<E: std::fmt::Display>(context: impl std::fmt::Display) -> impl FnOnce(E) -> Error {
    move |e| Error::Usage(format!("{context}: {e}"))
}
