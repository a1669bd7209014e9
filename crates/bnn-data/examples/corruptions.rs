//! Writes the 15 corrupted versions of a test set, for looking at and for peer evaluation.
//!
//! Run: `cargo run -p bnn-data --release --example corruptions -- OUT [--dataset fashion-mnist]
//! [--data DIR] [--seed 0]`
//!
//! Writes `OUT/preview.png` (the first 12 test images, one row per corruption, the clean
//! images on top) and, per corruption, `OUT/<kind>-<severity>/t10k-images-idx3-ubyte` and
//! `t10k-labels-idx1-ubyte` (uncompressed IDX, readable by `load_idx_dir` and numpy).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bnn_data::{Corrupted, Corruption, DataError, Dataset, DatasetId, Locator, Split};

/// Writes `bytes` to `path` atomically (through a temporary name beside it).
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), DataError> {
    bnn_io::write_atomic(path, bytes, bnn_io::Replace::Always)
        .map_err(|e| DataError::io(e.path(), std::io::Error::other(e.to_string())))
}

/// IDX header: two zero bytes, the type (0x08 = u8), the rank, then big-endian dimensions.
fn idx(dims: &[usize], data: &[u8]) -> Vec<u8> {
    let mut out = vec![0, 0, 0x08, dims.len() as u8];
    for &d in dims {
        out.extend_from_slice(&(d as u32).to_be_bytes());
    }
    out.extend_from_slice(data);
    out
}

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

fn main() -> Result<(), DataError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let out = PathBuf::from(
        args.first()
            .filter(|a| !a.starts_with("--"))
            .ok_or_else(|| {
                DataError::Config(
                    "usage: corruptions OUT [--dataset NAME] [--data DIR] [--seed S]".into(),
                )
            })?,
    );
    let id: DatasetId = arg(&args, "--dataset")
        .unwrap_or_else(|| "fashion-mnist".into())
        .parse()?;
    let seed: u64 = match arg(&args, "--seed") {
        Some(s) => s
            .parse()
            .map_err(|_| DataError::Config(format!("--seed `{s}` is not an integer")))?,
        None => 0,
    };
    let locator = Locator {
        download: false,
        ..Locator::from_env(arg(&args, "--data").map(Into::into))
    };
    let test: Arc<dyn Dataset> = bnn_data::open(id, Split::Test, &locator)?;
    let (c, h, w) = test.shape();
    std::fs::create_dir_all(&out).map_err(|e| DataError::io(&out, e))?;

    let labels: Vec<u8> = (0..test.len())
        .map(|i| test.label(i).map(|l| l as u8))
        .collect::<Result<_, _>>()?;
    let shown = 12.min(test.len());
    let corruptions = Corruption::all();
    let mut rows: Vec<Vec<Vec<u8>>> = vec![
        (0..shown)
            .map(|i| test.get(i).map(|s| s.pixels))
            .collect::<Result<_, _>>()?,
    ];
    for &corruption in &corruptions {
        let data = Corrupted::new(test.clone(), corruption, seed);
        let mut pixels = Vec::with_capacity(test.len() * c * h * w);
        for i in 0..data.len() {
            pixels.extend_from_slice(&data.get(i)?.pixels);
        }
        let per = c * h * w;
        rows.push(
            (0..shown)
                .map(|i| pixels[i * per..(i + 1) * per].to_vec())
                .collect(),
        );
        let dir = out.join(format!("{}-{}", corruption.kind(), corruption.severity()));
        std::fs::create_dir_all(&dir).map_err(|e| DataError::io(&dir, e))?;
        let dims: Vec<usize> = if c == 1 {
            vec![test.len(), h, w]
        } else {
            vec![test.len(), c, h, w]
        };
        write_atomic(&dir.join("t10k-images-idx3-ubyte"), &idx(&dims, &pixels))?;
        write_atomic(
            &dir.join("t10k-labels-idx1-ubyte"),
            &idx(&[labels.len()], &labels),
        )?;
        println!("{corruption}: {} images -> {}", data.len(), dir.display());
    }

    // Preview: grey (first channel) tiles with a 2-pixel gap.
    let gap = 2;
    let (pw, ph) = (shown * (w + gap), rows.len() * (h + gap));
    let mut sheet = image::GrayImage::new(pw as u32, ph as u32);
    for (r, row) in rows.iter().enumerate() {
        for (k, img) in row.iter().enumerate() {
            for y in 0..h {
                for x in 0..w {
                    let px = image::Luma([img[y * w + x]]);
                    sheet.put_pixel((k * (w + gap) + x) as u32, (r * (h + gap) + y) as u32, px);
                }
            }
        }
    }
    let preview = out.join("preview.png");
    let mut png = std::io::Cursor::new(Vec::new());
    sheet
        .write_to(&mut png, image::ImageFormat::Png)
        .map_err(|e| DataError::Config(format!("{}: {e}", preview.display())))?;
    write_atomic(&preview, png.get_ref())?;
    println!("preview -> {}", preview.display());
    Ok(())
}
