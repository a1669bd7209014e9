//! One drawing code path, two file formats: a figure draws on any plotters backend; the file
//! name's extension picks a bitmap (encoded as PNG by the `image` crate) or an SVG string. Files
//! are written through [`bnn_io`]: under a temporary name in the target directory, then renamed
//! into place.

use std::path::Path;

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

/// Writes `bytes` to `path` atomically ([`bnn_io::write_atomic`]: a temporary file beside it,
/// renamed over it), so a reader never sees half a figure; an existing figure is replaced and
/// keeps its permissions. Temporary files of `path` that killed writers left are removed
/// first.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    bnn_io::write_atomic(path, bytes, bnn_io::Replace::Always).map_err(|e| {
        let path = e.path().to_path_buf();
        let source = match e {
            // `PlotError::Io` names the path itself.
            bnn_io::Error::Io { action, source, .. } => {
                std::io::Error::new(source.kind(), format!("cannot {action}: {source}"))
            }
            other => std::io::Error::other(other.to_string()),
        };
        PlotError::Io { path, source }
    })
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
