//! Labelled images in class folders, the layout of torchvision's `ImageFolder`: `DIR/train/<class>/`
//! and `DIR/test/<class>/` for the two splits, or a flat `DIR/<class>/` for training data
//! only. PNG and JPEG files, grey or RGB, any size: decoded once, brought to one size and held
//! in memory.
//!
//! - Classes are the sub-folder names sorted bytewise; the test split must have the same ones.
//! - Channels: 1 when every image is grey, else 3 (grey images are then repeated to RGB);
//!   [`FolderImages::channels`] forces either.
//! - Size: every image is resized (bilinear, aspect not kept, as torchvision's
//!   `Resize((n, n))`) to [`FolderImages::size`]; without it the images must all have the
//!   first image's size, and be square.

use std::path::{Path, PathBuf};

use image::imageops::FilterType;

use crate::dataset::{InMemoryDataset, Split};
use crate::error::{DataError, Result};
use crate::folder::{
    check_class_count, decode_error, decode_image, is_image, open_image, sorted_entries,
};
use crate::memory::memory_budget;

/// How the images of a class-folder data set are brought to one shape.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FolderImages {
    /// Resize every image to `size x size` pixels; `None`: every image must already be the
    /// first image's size, and square.
    pub size: Option<usize>,
    /// Channels to produce (1 or 3); `None`: 1 when every image is grey, else 3.
    pub channels: Option<usize>,
}

/// The largest side accepted for [`FolderImages::size`]: beyond it, a data set held in memory
/// no longer fits a machine.
pub const MAX_IMAGE_SIDE: usize = 4096;

/// The names of the sub-folders of `dir`, sorted bytewise.
fn sub_folders(dir: &Path) -> Result<Vec<String>> {
    Ok(sorted_entries(dir)?
        .into_iter()
        .filter(|p| p.is_dir())
        .map(|p| {
            p.file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned()
        })
        .collect())
}

/// The folder of `split` under `root`: `root/train` or `root/test` when `root/train` exists,
/// else `root` itself for the training split (a flat layout has no test split: an error).
pub fn split_dir(root: &Path, split: Split) -> Result<PathBuf> {
    if !root.is_dir() {
        return Err(DataError::format(root, "not a folder"));
    }
    let train = root.join("train");
    match (train.is_dir(), split) {
        (true, Split::Train) => Ok(train),
        (true, Split::Test) => match root.join("test") {
            t if t.is_dir() => Ok(t),
            _ => Err(DataError::format(
                root,
                "no test split: the folder has train/ but no test/",
            )),
        },
        (false, Split::Train) => Ok(root.to_path_buf()),
        (false, Split::Test) => Err(DataError::format(
            root,
            "no test split: a flat folder of classes is training data only (use train/ and \
             test/ sub-folders for both)",
        )),
    }
}

/// Whether `root` holds a test split ([`split_dir`]).
pub fn folder_has_test(root: &Path) -> bool {
    root.join("train").is_dir() && root.join("test").is_dir()
}

/// The class names (sorted sub-folder names) of the training split of `root`.
pub fn folder_classes(root: &Path) -> Result<Vec<String>> {
    let dir = split_dir(root, Split::Train)?;
    let names = sub_folders(&dir)?;
    check_class_count(&dir, names.len())?;
    if names.len() < 2 {
        return Err(DataError::format(
            &dir,
            format!(
                "{} class sub-folder{}: a classifier needs at least two (one folder of images \
                 per class)",
                names.len(),
                if names.len() == 1 { "" } else { "s" }
            ),
        ));
    }
    Ok(names)
}

/// Reads the header of `path`: `(width, height, grey)`.
fn header(path: &Path) -> Result<(u32, u32, bool)> {
    let decoder = open_image(path)?
        .into_decoder()
        .map_err(|e| decode_error(path, e))?;
    let (w, h) = image::ImageDecoder::dimensions(&decoder);
    if image::ImageDecoder::total_bytes(&decoder) > crate::MAX_DECODE_BYTES {
        return Err(decode_error(
            path,
            image::ImageError::Limits(image::error::LimitError::from_kind(
                image::error::LimitErrorKind::InsufficientMemory,
            )),
        ));
    }
    let grey = !image::ImageDecoder::color_type(&decoder).has_color();
    if w == 0 || h == 0 {
        return Err(DataError::Decode {
            path: path.to_path_buf(),
            reason: "image has a zero dimension".into(),
        });
    }
    Ok((w, h, grey))
}

/// Loads `split` of the class-folder data set at `root` (module docs), labelled by the
/// training split's classes. Errors name the file or folder: an empty class folder, a class
/// of the test split the training split lacks, mixed sizes without a target size, an
/// unreadable or truncated image, one over the decoding limits ([`crate::MAX_DECODE_SIDE`],
/// [`crate::MAX_DECODE_BYTES`]), more classes than [`MAX_CLASSES`](crate::MAX_CLASSES), or images that together
/// take more than the memory budget ([`crate::memory_budget`]), checked before any is decoded.
pub fn load_class_folders(
    root: &Path,
    split: Split,
    images: FolderImages,
) -> Result<InMemoryDataset> {
    load_class_folders_within(root, split, images, memory_budget(u64::MAX))
}

/// [`load_class_folders`] with the images' bytes bounded by `budget`.
fn load_class_folders_within(
    root: &Path,
    split: Split,
    images: FolderImages,
    budget: u64,
) -> Result<InMemoryDataset> {
    if let Some(c) = images.channels
        && c != 1
        && c != 3
    {
        return Err(DataError::Config(format!(
            "images have 1 or 3 channels, not {c}"
        )));
    }
    if let Some(s) = images.size
        && !(1..=MAX_IMAGE_SIDE).contains(&s)
    {
        return Err(DataError::Config(format!(
            "image size {s} is outside 1..={MAX_IMAGE_SIDE}"
        )));
    }
    let classes = folder_classes(root)?;
    let dir = split_dir(root, split)?;
    let present = sub_folders(&dir)?;
    if let Some(extra) = present.iter().find(|c| !classes.contains(c)) {
        return Err(DataError::format(
            dir.join(extra),
            format!(
                "a class the training split does not have (its classes: {})",
                classes.join(", ")
            ),
        ));
    }
    let mut files = Vec::new();
    for (label, class) in classes.iter().enumerate() {
        let class_dir = dir.join(class);
        if !class_dir.is_dir() {
            continue; // a test split may lack a class
        }
        let before = files.len();
        for f in sorted_entries(&class_dir)? {
            if f.is_file() && is_image(&f) {
                files.push((f, label as u32));
            }
        }
        if files.len() == before {
            return Err(DataError::format(
                &class_dir,
                "an empty class folder: no .png, .jpg or .jpeg file",
            ));
        }
    }
    // Headers first: the shape is settled before any pixel is decoded.
    let headers = files
        .iter()
        .map(|(f, _)| header(f))
        .collect::<Result<Vec<_>>>()?;
    let channels = images
        .channels
        .unwrap_or(if headers.iter().all(|h| h.2) { 1 } else { 3 });
    let side = match images.size {
        Some(s) => s,
        None => {
            let (w0, h0, _) = headers[0];
            if let Some(i) = headers.iter().position(|&(w, h, _)| (w, h) != (w0, h0)) {
                return Err(DataError::format(
                    &files[i].0,
                    format!(
                        "{}x{} pixels, and {} is {w0}x{h0}: images of mixed sizes need a \
                         target size (--image-size)",
                        headers[i].0,
                        headers[i].1,
                        files[0].0.display()
                    ),
                ));
            }
            if w0 != h0 {
                return Err(DataError::format(
                    &files[0].0,
                    format!(
                        "{w0}x{h0} pixels: the models take square images; give a size \
                         (--image-size) to resize them"
                    ),
                ));
            }
            w0 as usize
        }
    };
    let plane = side * side;
    let total = (files.len() as u64).saturating_mul((channels * plane) as u64);
    if total > budget {
        return Err(DataError::format(
            &dir,
            format!(
                "{} images of {channels}x{side}x{side} take {total} bytes, more than the \
                 {budget} bytes a data set may take on this machine (a quarter of its available \
                 memory): give a smaller size (--image-size)",
                files.len()
            ),
        ));
    }
    let mut pixels = Vec::with_capacity(total as usize);
    for (path, _) in &files {
        let decoded = decode_image(path)?;
        let decoded = match (decoded.width() as usize, decoded.height() as usize) {
            (w, h) if w == side && h == side => decoded,
            _ => decoded.resize_exact(side as u32, side as u32, FilterType::Triangle),
        };
        match channels {
            1 => pixels.extend_from_slice(decoded.to_luma8().as_raw()),
            _ => {
                let rgb = decoded.to_rgb8();
                for c in 0..3 {
                    pixels.extend(rgb.pixels().map(|p| p.0[c]));
                }
            }
        }
    }
    InMemoryDataset::new(
        pixels,
        files.iter().map(|(_, l)| *l).collect(),
        (channels, side, side),
        classes.len(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Dataset;

    fn png(path: &Path, w: u32, h: u32, value: u8, rgb: bool) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        if rgb {
            image::RgbImage::from_pixel(w, h, image::Rgb([value, 0, 255 - value]))
                .save(path)
                .unwrap();
        } else {
            image::GrayImage::from_pixel(w, h, image::Luma([value]))
                .save(path)
                .unwrap();
        }
    }

    #[test]
    fn splits_classes_channels_and_sizes_come_from_the_folders() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        png(&r.join("train/cat/a.png"), 4, 4, 10, false);
        png(&r.join("train/cat/b.PNG"), 4, 4, 20, false);
        png(&r.join("train/dog/c.png"), 4, 4, 30, false);
        png(&r.join("test/dog/d.png"), 4, 4, 40, false);
        std::fs::write(r.join("train/cat/notes.txt"), "ignored").unwrap();
        let train = load_class_folders(r, Split::Train, FolderImages::default()).unwrap();
        assert_eq!(
            (train.len(), train.classes(), train.shape()),
            (3, 2, (1, 4, 4))
        );
        assert_eq!(train.labels(), &[0, 0, 1]);
        assert_eq!(train.pixels_of(2).unwrap()[0], 30);
        let test = load_class_folders(r, Split::Test, FolderImages::default()).unwrap();
        assert_eq!((test.labels(), test.classes()), (&[1u32][..], 2));

        // One RGB image makes the whole set RGB; a size resizes every image.
        png(&r.join("train/dog/e.png"), 8, 6, 50, true);
        let rgb = load_class_folders(
            r,
            Split::Train,
            FolderImages {
                size: Some(4),
                channels: None,
            },
        )
        .unwrap();
        assert_eq!(rgb.shape(), (3, 4, 4));
        let grey_again = load_class_folders(
            r,
            Split::Train,
            FolderImages {
                size: Some(2),
                channels: Some(1),
            },
        )
        .unwrap();
        assert_eq!(grey_again.shape(), (1, 2, 2));
    }

    #[test]
    fn bad_folders_are_refused_naming_the_file_or_folder() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        png(&r.join("a/1.png"), 4, 4, 0, false);
        png(&r.join("b/2.png"), 5, 4, 0, false);
        let e = load_class_folders(r, Split::Train, FolderImages::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("2.png") && e.contains("mixed sizes") && e.contains("--image-size"),
            "{e}"
        );
        assert!(
            load_class_folders(
                r,
                Split::Train,
                FolderImages {
                    size: Some(4),
                    channels: None
                }
            )
            .is_ok()
        );
        let e = load_class_folders(r, Split::Test, FolderImages::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("no test split"), "{e}");

        std::fs::create_dir_all(r.join("c")).unwrap();
        let e = load_class_folders(
            r,
            Split::Train,
            FolderImages {
                size: Some(4),
                channels: None,
            },
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains(&r.join("c").display().to_string()) && e.contains("empty class folder"),
            "{e}"
        );

        std::fs::write(r.join("c/broken.png"), b"not a png").unwrap();
        let e = load_class_folders(
            r,
            Split::Train,
            FolderImages {
                size: Some(4),
                channels: None,
            },
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("broken.png"), "{e}");

        let one = tempfile::tempdir().unwrap();
        png(&one.path().join("only/1.png"), 4, 4, 0, false);
        let e = load_class_folders(one.path(), Split::Train, FolderImages::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("at least two"), "{e}");
        let e = load_class_folders(
            one.path(),
            Split::Train,
            FolderImages {
                size: Some(0),
                channels: None,
            },
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("image size 0"), "{e}");
    }

    /// A CRC-32 of `bytes` (PNG chunks).
    fn crc(bytes: &[u8]) -> u32 {
        let mut c = flate2::Crc::new();
        c.update(bytes);
        c.sum()
    }

    /// A small PNG whose header declares `w x h` (its data is for 4x4 pixels).
    fn png_declaring(path: &Path, w: u32, h: u32) {
        png(path, 4, 4, 0, false);
        let mut bytes = std::fs::read(path).unwrap();
        // IHDR: 8 signature bytes, 4 length, "IHDR", width, height, 5 more, then its CRC.
        bytes[16..20].copy_from_slice(&w.to_be_bytes());
        bytes[20..24].copy_from_slice(&h.to_be_bytes());
        let sum = crc(&bytes[12..29]);
        bytes[29..33].copy_from_slice(&sum.to_be_bytes());
        std::fs::write(path, bytes).unwrap();
    }

    /// A PNG declaring 20000x20000 pixels was decoded whole (400 MB and more); refused from
    /// its header, naming the file.
    #[test]
    fn an_image_declaring_a_huge_size_is_refused_from_its_header() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        png(&r.join("a/1.png"), 4, 4, 0, false);
        png_declaring(&r.join("b/bomb.png"), 20_000, 20_000);
        for size in [None, Some(4)] {
            let e = load_class_folders(
                r,
                Split::Train,
                FolderImages {
                    size,
                    channels: None,
                },
            )
            .map(|_| ())
            .expect_err("refused")
            .to_string();
            assert!(
                e.contains("bomb.png") && e.contains("20000x20000") && e.contains("limit"),
                "{e}"
            );
        }
        // The lazy ImageNet-style folder refuses it too.
        let lazy = crate::ImageFolder::open(r, crate::FolderConfig::eval()).unwrap();
        let e = lazy.get(1).map(|_| ()).expect_err("refused").to_string();
        assert!(e.contains("bomb.png") && e.contains("limit"), "{e}");
    }

    /// A JPEG cut to half its length decoded without an error (the decoder fills in the
    /// rest); a truncated JPEG or PNG is refused naming the file.
    #[test]
    fn truncated_images_are_refused_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        png(&r.join("a/1.png"), 96, 96, 0, false);
        std::fs::create_dir_all(r.join("b")).unwrap();
        let noise = image::RgbImage::from_fn(96, 96, |x, y| {
            image::Rgb([(x * 17 + y * 5) as u8, (x * y) as u8, (y * 29) as u8])
        });
        let jpeg = r.join("b/cut.jpg");
        noise.save(&jpeg).unwrap();
        let whole = std::fs::read(&jpeg).unwrap();
        let images = FolderImages::default();
        assert!(load_class_folders(r, Split::Train, images).is_ok());
        std::fs::write(&jpeg, &whole[..whole.len() / 2]).unwrap();
        let e = load_class_folders(r, Split::Train, images)
            .map(|_| ())
            .expect_err("refused")
            .to_string();
        assert!(e.contains("cut.jpg") && e.contains("truncated"), "{e}");
        // Trailing bytes after the end marker are tolerated (some cameras append data).
        let mut trailing = whole.clone();
        trailing.extend_from_slice(b"trailer");
        std::fs::write(&jpeg, &trailing).unwrap();
        assert!(load_class_folders(r, Split::Train, images).is_ok());
        std::fs::remove_file(&jpeg).unwrap();

        let cut_png = r.join("b/cut.png");
        noise.save(&cut_png).unwrap();
        let whole = std::fs::read(&cut_png).unwrap();
        // Without its IEND chunk (the last 12 bytes).
        std::fs::write(&cut_png, &whole[..whole.len() - 12]).unwrap();
        let e = load_class_folders(r, Split::Train, images)
            .map(|_| ())
            .expect_err("refused")
            .to_string();
        assert!(e.contains("cut.png") && e.contains("truncated"), "{e}");
    }

    /// Images that together take more than the memory budget are refused before any is
    /// decoded, naming the folder and the sizes.
    #[test]
    fn images_over_the_memory_budget_are_refused_before_decoding() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        png(&r.join("a/1.png"), 4, 4, 0, false);
        png(&r.join("b/2.png"), 4, 4, 0, false);
        let images = FolderImages {
            size: Some(64),
            channels: Some(3),
        };
        let e = load_class_folders_within(r, Split::Train, images, 1000)
            .map(|_| ())
            .expect_err("refused")
            .to_string();
        assert!(e.contains("2 images") && e.contains("24576 bytes"), "{e}");
        assert!(load_class_folders_within(r, Split::Train, images, 1 << 20).is_ok());
    }

    /// More class folders than [`MAX_CLASSES`](crate::MAX_CLASSES) are refused before they are read.
    #[test]
    fn more_class_folders_than_the_limit_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..=crate::MAX_CLASSES {
            std::fs::create_dir(dir.path().join(format!("c{i}"))).unwrap();
        }
        let e = folder_classes(dir.path())
            .map(|_| ())
            .expect_err("refused")
            .to_string();
        assert!(e.contains("32769 class") && e.contains("32768"), "{e}");
        let e = crate::ImageFolder::open(dir.path(), crate::FolderConfig::eval())
            .map(|_| ())
            .expect_err("refused")
            .to_string();
        assert!(e.contains("32769 class"), "{e}");
    }
}
