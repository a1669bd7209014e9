//! The kinds of corruption and their severities, on their own so that the error type can
//! name a kind without depending on the corruptions themselves.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The highest severity; severities run `1..=MAX_SEVERITY`.
pub const MAX_SEVERITY: u8 = 3;

/// One kind of corruption (serialised by its kebab-case [`CorruptionKind::name`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CorruptionKind {
    /// Rotation about the centre by [`ROTATION_DEGREES`](crate::ROTATION_DEGREES), sense drawn per image.
    Rotation,
    /// Additive Gaussian noise of standard deviation [`NOISE_SIGMA`](crate::NOISE_SIGMA).
    GaussianNoise,
    /// Contrast reduced to [`CONTRAST_FACTOR`](crate::CONTRAST_FACTOR) around the mean grey level.
    Contrast,
    /// Shift by [`TRANSLATION_PIXELS`](crate::TRANSLATION_PIXELS) along each axis, direction drawn per image.
    Translation,
    /// Gaussian blur of standard deviation [`BLUR_SIGMA`](crate::BLUR_SIGMA) pixels.
    Blur,
}

impl CorruptionKind {
    /// Every kind, in table order.
    pub const ALL: [CorruptionKind; 5] = [
        CorruptionKind::Rotation,
        CorruptionKind::GaussianNoise,
        CorruptionKind::Contrast,
        CorruptionKind::Translation,
        CorruptionKind::Blur,
    ];

    /// The kebab-case name: `rotation`, `gaussian-noise`, `contrast`, `translation`, `blur`.
    pub fn name(self) -> &'static str {
        match self {
            CorruptionKind::Rotation => "rotation",
            CorruptionKind::GaussianNoise => "gaussian-noise",
            CorruptionKind::Contrast => "contrast",
            CorruptionKind::Translation => "translation",
            CorruptionKind::Blur => "blur",
        }
    }

    /// Position in [`CorruptionKind::ALL`]; also keys the kind's random stream.
    pub(crate) fn ordinal(self) -> u64 {
        self as u64
    }
}

impl fmt::Display for CorruptionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
