//! Colours, the embedded font and text sizes shared by every figure.

use std::sync::OnceLock;

use plotters::style::{FontStyle, RGBColor, register_font};

use crate::error::{PlotError, Result};

/// DejaVu Sans (Bitstream Vera licence, see `assets/DejaVuSans-LICENSE.txt`): plotters draws
/// text with it through `ab_glyph`, so no system font or font library is needed.
pub(crate) static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

/// The font family name figures ask plotters for.
pub(crate) const FAMILY: &str = "sans-serif";

/// Registers the embedded font once per process.
pub(crate) fn ensure_font() -> Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    // plotters needs the family registered for its own measurements; ab_glyph must also parse
    // it for [`crate::text::TextBackend`].
    let ok = *REGISTERED.get_or_init(|| {
        register_font(FAMILY, FontStyle::Normal, FONT).is_ok()
            && ab_glyph::FontRef::try_from_slice(FONT).is_ok()
    });
    if ok { Ok(()) } else { Err(PlotError::Font) }
}

/// The Okabe-Ito palette (Okabe & Ito 2008, "Color Universal Design"): eight colours told
/// apart with any common colour-vision deficiency.
pub mod okabe_ito {
    use plotters::style::RGBColor;

    /// Black.
    pub const BLACK: RGBColor = RGBColor(0, 0, 0);
    /// Orange.
    pub const ORANGE: RGBColor = RGBColor(230, 159, 0);
    /// Sky blue.
    pub const SKY_BLUE: RGBColor = RGBColor(86, 180, 233);
    /// Bluish green.
    pub const BLUISH_GREEN: RGBColor = RGBColor(0, 158, 115);
    /// Yellow.
    pub const YELLOW: RGBColor = RGBColor(240, 228, 66);
    /// Blue.
    pub const BLUE: RGBColor = RGBColor(0, 114, 178);
    /// Vermillion.
    pub const VERMILLION: RGBColor = RGBColor(213, 94, 0);
    /// Reddish purple.
    pub const REDDISH_PURPLE: RGBColor = RGBColor(204, 121, 167);
}

use okabe_ito::{BLACK, BLUE, BLUISH_GREEN, ORANGE, REDDISH_PURPLE, SKY_BLUE, VERMILLION};

/// Colours for a list of series (methods, scores), in order; cycles after seven.
pub(crate) fn series_colour(i: usize) -> RGBColor {
    const CYCLE: [RGBColor; 7] = [
        BLUE,
        ORANGE,
        BLUISH_GREEN,
        REDDISH_PURPLE,
        SKY_BLUE,
        VERMILLION,
        BLACK,
    ];
    CYCLE[i % CYCLE.len()]
}

/// Mid grey for chance lines and histograms.
pub(crate) const GREY: RGBColor = RGBColor(120, 120, 120);

/// Text sizes for a figure, scaled so that a figure drawn at `reference_width` uses the base
/// sizes and a larger one keeps the same proportions.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Text {
    pub title: f64,
    pub label: f64,
    pub tick: f64,
    pub note: f64,
    pub scale: f64,
}

impl Text {
    pub fn for_width(width: u32, reference_width: u32) -> Self {
        let scale = (f64::from(width) / f64::from(reference_width)).clamp(0.6, 4.0);
        Self {
            title: 20.0 * scale,
            label: 16.0 * scale,
            tick: 14.0 * scale,
            note: 13.0 * scale,
            scale,
        }
    }

    /// A length in pixels at this scale.
    pub fn px(&self, base: f64) -> i32 {
        (base * self.scale).round() as i32
    }

    /// A length in pixels at this scale, as `u32`.
    pub fn upx(&self, base: f64) -> u32 {
        (base * self.scale).round().max(1.0) as u32
    }
}

/// A finite-value check shared by the figures' input validation.
pub(crate) fn check_finite(what: &'static str, values: &[f64]) -> Result<()> {
    match values.iter().position(|v| !v.is_finite()) {
        Some(i) => Err(PlotError::bad_input(
            what,
            format!("value {} at index {i} is not finite", values[i]),
        )),
        None => Ok(()),
    }
}
