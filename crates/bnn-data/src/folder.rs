//! Image-folder data sets (ImageNet-1k layout): `root/<class>/*.JPEG`, decoded lazily.
//!
//! Classes are the sub-folder names sorted bytewise (for ImageNet, the WordNet ids
//! `n01440764` …), so class indices match torchvision's `ImageFolder`.

use std::path::{Path, PathBuf};

use image::imageops::FilterType;

use crate::dataset::{Dataset, Sample, Split};
use crate::error::{DataError, Result};

/// How each image is brought to a fixed size when decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FolderConfig {
    /// The shorter side is resized (bilinear, aspect kept) to this many pixels.
    pub resize_shorter: u32,
    /// Then a centred `crop × crop` square is cut out; must be `<= resize_shorter`.
    pub crop: u32,
}

impl FolderConfig {
    /// For training: shorter side 256, centred 256 × 256 square, leaving the random
    /// resized crop to 224 to the augmentation pipeline.
    pub fn train() -> Self {
        FolderConfig {
            resize_shorter: 256,
            crop: 256,
        }
    }

    /// The usual evaluation protocol: shorter side 256, centred 224 × 224 crop.
    pub fn eval() -> Self {
        FolderConfig {
            resize_shorter: 256,
            crop: 224,
        }
    }
}

/// A lazily decoded image-folder data set of RGB images.
#[derive(Debug, Clone)]
pub struct ImageFolder {
    files: Vec<(PathBuf, u32)>,
    class_names: Vec<String>,
    config: FolderConfig,
}

/// The widest or tallest image decoded, in pixels: above any photograph in an image data set
/// (ImageNet's largest are under 10,000 pixels a side), below the 20,000 x 20,000 of a small
/// PNG that declares half a gigabyte of pixels.
pub const MAX_DECODE_SIDE: u32 = 16_384;

/// The most bytes one image may take decoded (and the decoder allocate for it), and the
/// largest image file read: 256 MiB, an 8-bit RGB image of 9,400 x 9,400 pixels; ImageNet's
/// largest images take under 100 MB decoded. The `image` crate's own default is 512 MiB.
pub const MAX_DECODE_BYTES: u64 = 256 << 20;

/// The decoding limits of every image read ([`MAX_DECODE_SIDE`], [`MAX_DECODE_BYTES`]).
fn limits() -> image::Limits {
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(MAX_DECODE_SIDE);
    limits.max_image_height = Some(MAX_DECODE_SIDE);
    limits.max_alloc = Some(MAX_DECODE_BYTES);
    limits
}

/// The error for an image at `path` that does not decode: a size over the limits names the
/// size the file declares (read again without limits: only its header).
pub(crate) fn decode_error(path: &Path, e: image::ImageError) -> DataError {
    let reason = match e {
        image::ImageError::Limits(_) => {
            let declared = image::ImageReader::open(path)
                .and_then(|r| r.with_guessed_format())
                .ok()
                .and_then(|mut r| {
                    r.no_limits();
                    r.into_dimensions().ok()
                });
            let size = declared.map_or("its size".to_string(), |(w, h)| format!("{w}x{h} pixels"));
            format!(
                "{size}: over the decoding limits (at most {MAX_DECODE_SIDE} pixels a side and \
                 {MAX_DECODE_BYTES} bytes decoded)"
            )
        }
        other => other.to_string(),
    };
    DataError::Decode {
        path: path.to_path_buf(),
        reason,
    }
}

/// An image reader for `path`, its format guessed from the file's first bytes, with the
/// decoding limits set.
pub(crate) fn open_image(
    path: &Path,
) -> Result<image::ImageReader<std::io::BufReader<std::fs::File>>> {
    let mut reader = image::ImageReader::open(path)
        .map_err(|e| DataError::io(path, e))?
        .with_guessed_format()
        .map_err(|e| DataError::io(path, e))?;
    reader.limits(limits());
    Ok(reader)
}

/// Whether the image file `bytes` ends where its format says it ends: a JPEG has its
/// end-of-image marker (`FF D9`) after its last scan, a PNG its `IEND` chunk. The JPEG
/// decoder fills a cut file's missing part with grey instead of failing.
fn is_complete(bytes: &[u8]) -> bool {
    if bytes.starts_with(&[0xFF, 0xD8]) {
        // From the end: an end marker must come before (after, in the file) any
        // start-of-scan; neither pair occurs inside entropy-coded data (0xFF is stuffed).
        for i in (0..bytes.len().saturating_sub(1)).rev() {
            match (bytes[i], bytes[i + 1]) {
                (0xFF, 0xD9) => return true,
                (0xFF, 0xDA) => return false,
                _ => {}
            }
        }
        return false;
    }
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        let mut at = 8usize;
        while let Some(head) = bytes.get(at..at + 8) {
            let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
            let Some(end) = at.checked_add(12).and_then(|e| e.checked_add(len)) else {
                return false;
            };
            if end > bytes.len() {
                return false;
            }
            if &head[4..8] == b"IEND" {
                return true;
            }
            at = end;
        }
        return false;
    }
    true
}

/// The image at `path`, decoded within the limits ([`MAX_DECODE_SIDE`], [`MAX_DECODE_BYTES`]);
/// a file that does not decode, is over the limits, or is truncated is an error naming it.
pub(crate) fn decode_image(path: &Path) -> Result<image::DynamicImage> {
    let size = std::fs::metadata(path)
        .map_err(|e| DataError::io(path, e))?
        .len();
    if size > MAX_DECODE_BYTES {
        return Err(DataError::Decode {
            path: path.to_path_buf(),
            reason: format!("a file of {size} bytes, over the {MAX_DECODE_BYTES} read"),
        });
    }
    let bytes = std::fs::read(path).map_err(|e| DataError::io(path, e))?;
    let mut reader = image::ImageReader::new(std::io::Cursor::new(&bytes[..]))
        .with_guessed_format()
        .map_err(|e| DataError::io(path, e))?;
    reader.limits(limits());
    if !is_complete(&bytes) {
        return Err(DataError::Decode {
            path: path.to_path_buf(),
            reason: "the file is truncated: it ends before its format's end marker (a JPEG's \
                     FF D9, a PNG's IEND chunk)"
                .into(),
        });
    }
    reader.decode().map_err(|e| decode_error(path, e))
}

/// Whether `path` names a PNG or JPEG file (case-insensitive extension).
pub(crate) fn is_image(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .map(|e| matches!(e.to_ascii_lowercase().as_str(), "jpeg" | "jpg" | "png"))
        .unwrap_or(false)
}

/// The entries of `dir`, sorted bytewise.
pub(crate) fn sorted_entries(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| DataError::io(dir, e))? {
        out.push(entry.map_err(|e| DataError::io(dir, e))?.path());
    }
    out.sort();
    Ok(out)
}

impl ImageFolder {
    /// Scans `root/<class>/*.{JPEG,jpg,jpeg,png}` (case-insensitive extensions).
    pub fn open(root: impl AsRef<Path>, config: FolderConfig) -> Result<Self> {
        let root = root.as_ref();
        if config.crop == 0 || config.crop > config.resize_shorter {
            return Err(DataError::Config(format!(
                "crop {} must be in 1..={}",
                config.crop, config.resize_shorter
            )));
        }
        let class_dirs: Vec<PathBuf> = sorted_entries(root)?
            .into_iter()
            .filter(|p| p.is_dir())
            .collect();
        check_class_count(root, class_dirs.len())?;
        let mut class_names = Vec::new();
        let mut files = Vec::new();
        for class_dir in class_dirs {
            let label = class_names.len() as u32;
            class_names.push(
                class_dir
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned(),
            );
            for f in sorted_entries(&class_dir)? {
                if f.is_file() && is_image(&f) {
                    files.push((f, label));
                }
            }
        }
        if class_names.is_empty() {
            return Err(DataError::format(root, "no class sub-folders found"));
        }
        if files.is_empty() {
            return Err(DataError::format(
                root,
                "no image files found in the class folders",
            ));
        }
        Ok(ImageFolder {
            files,
            class_names,
            config,
        })
    }

    /// Opens `root/train` or `root/val` of an ImageNet-style tree.
    pub fn imagenet(root: impl AsRef<Path>, split: Split, config: FolderConfig) -> Result<Self> {
        let sub = match split {
            Split::Train => "train",
            Split::Test => "val",
        };
        Self::open(root.as_ref().join(sub), config)
    }

    /// The class folder names, in label order.
    pub fn class_names(&self) -> &[String] {
        &self.class_names
    }

    /// The file and label of sample `index`.
    pub fn file(&self, index: usize) -> Option<(&Path, u32)> {
        self.files.get(index).map(|(p, l)| (p.as_path(), *l))
    }
}

impl Dataset for ImageFolder {
    fn len(&self) -> usize {
        self.files.len()
    }
    fn classes(&self) -> usize {
        self.class_names.len()
    }
    fn shape(&self) -> (usize, usize, usize) {
        (3, self.config.crop as usize, self.config.crop as usize)
    }
    fn get(&self, index: usize) -> Result<Sample> {
        let (path, label) = self.files.get(index).ok_or(DataError::IndexOutOfRange {
            index,
            len: self.files.len(),
        })?;
        let img = decode_image(path)?.to_rgb8();
        let (w, h) = img.dimensions();
        if w == 0 || h == 0 {
            return Err(DataError::Decode {
                path: path.clone(),
                reason: "image has a zero dimension".into(),
            });
        }
        let s = self.config.resize_shorter as f64;
        let (nw, nh) = if w <= h {
            (s as u32, ((h as f64) * s / w as f64).round().max(s) as u32)
        } else {
            (((w as f64) * s / h as f64).round().max(s) as u32, s as u32)
        };
        let resized = image::imageops::resize(&img, nw, nh, FilterType::Triangle);
        let c = self.config.crop;
        let (x0, y0) = ((nw - c) / 2, (nh - c) / 2);
        let crop = image::imageops::crop_imm(&resized, x0, y0, c, c).to_image();
        let (cw, ch) = (c as usize, c as usize);
        let mut pixels = vec![0u8; 3 * cw * ch];
        for (i, p) in crop.pixels().enumerate() {
            for k in 0..3 {
                pixels[k * cw * ch + i] = p.0[k];
            }
        }
        Ok(Sample {
            pixels,
            channels: 3,
            height: ch,
            width: cw,
            label: *label,
        })
    }
    fn label(&self, index: usize) -> Result<u32> {
        self.files
            .get(index)
            .map(|(_, l)| *l)
            .ok_or(DataError::IndexOutOfRange {
                index,
                len: self.files.len(),
            })
    }
}

/// Refuses `n` class sub-folders of `dir` above [`MAX_CLASSES`](crate::MAX_CLASSES).
pub(crate) fn check_class_count(dir: &Path, n: usize) -> Result<()> {
    if n > crate::MAX_CLASSES {
        return Err(DataError::format(
            dir,
            format!(
                "{n} class sub-folders, more than the {} a data set may have",
                crate::MAX_CLASSES
            ),
        ));
    }
    Ok(())
}
