//! `swbnn export`: a model of any kind [`load_model`] opens, written as `.safetensors` under a
//! PyTorch library's names ([`bnn_interop`]).

use std::path::{Path, PathBuf};

use bnn_interop::{ExportAs, export_bytes, write_export};
use burn::prelude::*;

use crate::Error;
use crate::load::load_model;

/// An export: the model, the names to write and where.
#[derive(Debug, Clone)]
pub struct ExportRequest {
    /// A .swb file, a .qbnn file or a model directory (model.bpk and config.json).
    pub model: PathBuf,
    /// The names to write.
    pub convention: ExportAs,
    /// Output .safetensors file, or `-` for the bytes themselves ([`Exported::Stream`]).
    pub out: PathBuf,
    /// Replace an existing `out`.
    pub force: bool,
}

/// What [`export`] made.
#[derive(Debug)]
pub enum Exported {
    /// The `.safetensors` bytes, for standard output (`--out -`).
    Stream {
        /// The file's bytes.
        bytes: Vec<u8>,
        /// Tensors in it.
        tensors: usize,
    },
    /// The file written.
    File {
        /// Where.
        path: PathBuf,
        /// Tensors in it.
        tensors: usize,
    },
}

/// Reads `r.model` (any kind [`load_model`] opens) and writes it under `r.convention`'s names,
/// atomically, to `r.out`: an existing file only with `r.force`, never one of the inputs. With
/// `r.out` `-` it returns the bytes instead, for the caller to stream.
pub fn export(r: &ExportRequest, device: &Device) -> Result<Exported, Error> {
    if r.out == Path::new("-") {
        let loaded = load_model(&r.model, device)?;
        let (bytes, tensors) = export_bytes(&loaded.net, &loaded.config, r.convention)?;
        return Ok(Exported::Stream { bytes, tensors });
    }
    let out = crate::checks::output_target("--out", &r.out, Some(r.force), &[&r.model])?;
    let loaded = load_model(&r.model, device)?;
    // `force` again at the end: a file that appeared at --out meanwhile is not replaced.
    let tensors = write_export(&loaded.net, &loaded.config, r.convention, &out, r.force)?;
    Ok(Exported::File {
        path: r.out.clone(),
        tensors,
    })
}
