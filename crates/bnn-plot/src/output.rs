//! One drawing code path, two file formats: a figure draws on any plotters backend; the file
//! name's extension picks a bitmap (encoded as PNG by the `image` crate) or an SVG string. Files
//! are written under a temporary name in the target directory, then renamed into place.

use std::io::Write;
use std::path::{Path, PathBuf};

use image::ImageEncoder;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::{PlotError, Result};
use crate::style::ensure_font;
use crate::text::TextBackend;

/// Largest figure side in pixels (a 16k x 16k RGB buffer is 768 MiB).
pub const MAX_SIDE: u32 = 16_384;

/// The size of a figure in pixels (SVG user units for `.svg`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
}

impl Size {
    /// A `width` x `height` figure.
    pub const fn new(width: u32, height: u32) -> Self {
        Self { width, height }
    }
}

/// The two file formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Portable Network Graphics (RGB, 8 bit).
    Png,
    /// Scalable Vector Graphics (text stays text; the viewer's sans-serif font renders it).
    Svg,
}

impl Format {
    /// The format named by `path`'s extension (`.png` or `.svg`, any case).
    ///
    /// # Errors
    /// [`PlotError::UnsupportedFormat`] for any other extension.
    pub fn from_path(path: &Path) -> Result<Self> {
        match path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            Some("png") => Ok(Format::Png),
            Some("svg") => Ok(Format::Svg),
            _ => Err(PlotError::UnsupportedFormat {
                path: path.to_path_buf(),
            }),
        }
    }
}

/// A figure that can draw itself on any plotters backend.
pub(crate) trait Figure {
    /// Smallest size the layout fits in.
    const MIN_SIZE: Size;
    /// Draws the whole figure on `root` (already cleared to white).
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static;
}

/// Draws `figure` at `size` into `path` (format from the extension).
pub(crate) fn render<F: Figure>(figure: &F, size: Size, path: &Path) -> Result<()> {
    let format = Format::from_path(path)?;
    check_size(size, F::MIN_SIZE)?;
    ensure_font()?;
    let dims = (size.width, size.height);
    let bytes = match format {
        Format::Png => {
            let mut buf = vec![0u8; size.width as usize * size.height as usize * 3];
            {
                let backend = BitMapBackend::with_buffer(&mut buf, dims);
                let root = TextBackend::new(backend, true).into_drawing_area();
                root.fill(&WHITE)?;
                figure.draw(&root)?;
                root.present()?;
            }
            let mut png = Vec::new();
            image::codecs::png::PngEncoder::new(&mut png)
                .write_image(
                    &buf,
                    size.width,
                    size.height,
                    image::ExtendedColorType::Rgb8,
                )
                .map_err(|source| PlotError::Encode {
                    path: path.to_path_buf(),
                    source,
                })?;
            png
        }
        Format::Svg => {
            let mut svg = String::new();
            {
                let backend = SVGBackend::with_string(&mut svg, dims);
                let root = TextBackend::new(backend, false).into_drawing_area();
                root.fill(&WHITE)?;
                figure.draw(&root)?;
                root.present()?;
            }
            svg.into_bytes()
        }
    };
    write_atomic(path, &bytes)
}

fn check_size(size: Size, min: Size) -> Result<()> {
    let ok = (min.width..=MAX_SIDE).contains(&size.width)
        && (min.height..=MAX_SIDE).contains(&size.height);
    if ok {
        Ok(())
    } else {
        Err(PlotError::BadSize {
            width: size.width,
            height: size.height,
            min_width: min.width,
            min_height: min.height,
            max: MAX_SIDE,
        })
    }
}

/// The temporary name of `path` while process `pid` writes it: `.<name>.tmp-<pid>`.
fn temp_name(name: &str, pid: u32) -> String {
    format!(".{name}.tmp-{pid}")
}

/// Removes the temporary files of `name` in `dir` that writers killed before their rename
/// left (their process gone, where `/proc` tells; elsewhere none is removed).
fn remove_stale_temps(dir: &Path, name: &str) {
    let prefix = format!(".{name}.tmp-");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        let gone = file
            .strip_prefix(&prefix)
            .and_then(|pid| pid.parse::<u32>().ok())
            .is_some_and(|pid| {
                pid != std::process::id()
                    && Path::new("/proc/self").exists()
                    && !Path::new("/proc").join(pid.to_string()).exists()
            });
        if gone {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Writes `bytes` to a temporary file beside `path`, then renames it over `path`, so a reader
/// never sees half a figure. Temporary files of `path` that killed writers left are removed
/// first.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let io = |p: &Path| {
        let p = p.to_path_buf();
        move |source| PlotError::Io { path: p, source }
    };
    let name = path
        .file_name()
        .ok_or_else(|| PlotError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "no file name"),
        })?
        .to_string_lossy();
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    remove_stale_temps(dir, &name);
    let tmp: PathBuf = dir.join(temp_name(&name, std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp).map_err(io(&tmp))?;
        f.write_all(bytes).map_err(io(&tmp))?;
        f.sync_all().map_err(io(&tmp))?;
        // A replaced figure keeps its permissions and, where this process may, its owner.
        if let Ok(old) = std::fs::metadata(path) {
            use std::os::unix::fs::MetadataExt;
            f.set_permissions(old.permissions()).map_err(io(&tmp))?;
            let _ = std::os::unix::fs::fchown(&f, Some(old.uid()), Some(old.gid()));
        }
        std::fs::rename(&tmp, path).map_err(io(path))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_from_extension() {
        assert_eq!(
            Format::from_path(Path::new("a/b.PNG")).unwrap(),
            Format::Png
        );
        assert_eq!(Format::from_path(Path::new("b.svg")).unwrap(), Format::Svg);
        for bad in ["b.jpg", "b", "png"] {
            assert!(matches!(
                Format::from_path(Path::new(bad)),
                Err(PlotError::UnsupportedFormat { .. })
            ));
        }
    }

    /// A killed writer's temporary file used to stay beside the figure for good.
    #[test]
    fn stale_temporaries_of_killed_writers_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let stale = dir.path().join(".f.svg.tmp-4000000");
        let other = dir.path().join(".g.svg.tmp-4000000");
        std::fs::write(&stale, b"<sv").unwrap();
        std::fs::write(&other, b"<sv").unwrap();
        write_atomic(&dir.path().join("f.svg"), b"<svg/>").unwrap();
        assert!(!stale.exists(), "the stale temporary is left");
        assert!(
            other.exists(),
            "another file's temporary is not this writer's"
        );
        assert_eq!(std::fs::read(dir.path().join("f.svg")).unwrap(), b"<svg/>");
    }

    #[test]
    fn size_bounds() {
        let min = Size::new(100, 50);
        assert!(check_size(Size::new(100, 50), min).is_ok());
        assert!(check_size(Size::new(99, 50), min).is_err());
        assert!(check_size(Size::new(100, MAX_SIDE + 1), min).is_err());
    }
}
