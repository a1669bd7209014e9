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
use crate::folder::{decode_image, is_image, open_image, sorted_entries};

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
        .map_err(|e| DataError::Decode {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
    let (w, h) = image::ImageDecoder::dimensions(&decoder);
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
/// unreadable image.
pub fn load_class_folders(
    root: &Path,
    split: Split,
    images: FolderImages,
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
    let mut pixels = Vec::with_capacity(files.len() * channels * plane);
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
}
