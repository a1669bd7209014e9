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

/// An image reader for `path`, its format guessed from the file's first bytes.
pub(crate) fn open_image(
    path: &Path,
) -> Result<image::ImageReader<std::io::BufReader<std::fs::File>>> {
    image::ImageReader::open(path)
        .map_err(|e| DataError::io(path, e))?
        .with_guessed_format()
        .map_err(|e| DataError::io(path, e))
}

/// The image at `path`, decoded; a file that does not decode is an error naming it.
pub(crate) fn decode_image(path: &Path) -> Result<image::DynamicImage> {
    open_image(path)?.decode().map_err(|e| DataError::Decode {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
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
        let mut class_names = Vec::new();
        let mut files = Vec::new();
        for class_dir in sorted_entries(root)?.into_iter().filter(|p| p.is_dir()) {
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
