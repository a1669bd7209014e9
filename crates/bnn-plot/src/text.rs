//! Text drawn and measured with the embedded font, glyph by glyph.
//!
//! plotters 0.3.7's `ab_glyph` rasteriser places each glyph at the pen position without its
//! left side bearing, so gaps close up before round glyphs ("MNIST (OOD)" prints as
//! "MNIST(OOD)"). [`TextBackend`] wraps a backend and lays text out itself: pen advances with
//! kerning, each glyph's outline at its real bounds, anchors and quarter-turn rotations as
//! plotters defines them. Everything else goes straight to the wrapped backend. For SVG only
//! the measuring is replaced (the viewer draws SVG text), so both formats lay out alike.

use std::sync::OnceLock;

use ab_glyph::{Font, FontRef, PxScale, ScaleFont, point};
use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingBackend, DrawingErrorKind,
};

use crate::style::FONT;

fn font() -> &'static FontRef<'static> {
    static PARSED: OnceLock<FontRef<'static>> = OnceLock::new();
    // The font is compiled in and parsed by `ensure_font` before any figure is drawn; a
    // failure there is reported as `PlotError::Font`, so this cannot fail afterwards.
    PARSED.get_or_init(|| FontRef::try_from_slice(FONT).expect("embedded font parses"))
}

/// Width, ascent and height (ascent - descent) of `text` at `size` px, rounded up.
fn measure(text: &str, size: f64) -> (i32, i32, i32) {
    let f = font().as_scaled(PxScale::from(size as f32));
    let mut width = 0.0f32;
    let mut prev = None;
    for c in text.chars() {
        let id = f.glyph_id(c);
        if let Some(p) = prev {
            width += f.kern(p, id);
        }
        width += f.h_advance(id);
        prev = Some(id);
    }
    (
        width.ceil() as i32,
        f.ascent().ceil() as i32,
        (f.ascent() - f.descent()).ceil() as i32,
    )
}

/// A backend whose text goes through [`measure`] and, when `rasterise`, through ab_glyph.
pub(crate) struct TextBackend<B> {
    inner: B,
    rasterise: bool,
}

impl<B> TextBackend<B> {
    /// Wraps `inner`; `rasterise` draws text as pixels (bitmaps), otherwise only measures it.
    pub(crate) fn new(inner: B, rasterise: bool) -> Self {
        Self { inner, rasterise }
    }
}

type Res<E> = Result<(), DrawingErrorKind<E>>;

impl<B: DrawingBackend> DrawingBackend for TextBackend<B> {
    type ErrorType = B::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.inner.get_size()
    }
    fn ensure_prepared(&mut self) -> Res<B::ErrorType> {
        self.inner.ensure_prepared()
    }
    fn present(&mut self) -> Res<B::ErrorType> {
        self.inner.present()
    }
    fn draw_pixel(&mut self, point: BackendCoord, color: BackendColor) -> Res<B::ErrorType> {
        self.inner.draw_pixel(point, color)
    }
    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Res<B::ErrorType> {
        self.inner.draw_line(from, to, style)
    }
    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Res<B::ErrorType> {
        self.inner.draw_rect(upper_left, bottom_right, style, fill)
    }
    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Res<B::ErrorType> {
        self.inner.draw_path(path, style)
    }
    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Res<B::ErrorType> {
        self.inner.draw_circle(center, radius, style, fill)
    }
    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Res<B::ErrorType> {
        self.inner.fill_polygon(vert, style)
    }
    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        size: (u32, u32),
        src: &[u8],
    ) -> Res<B::ErrorType> {
        self.inner.blit_bitmap(pos, size, src)
    }

    fn estimate_text_size<S: BackendTextStyle>(
        &self,
        text: &str,
        style: &S,
    ) -> Result<(u32, u32), DrawingErrorKind<B::ErrorType>> {
        let (w, _, h) = measure(text, style.size());
        Ok((w.max(0) as u32, h.max(0) as u32))
    }

    fn draw_text<S: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        pos: BackendCoord,
    ) -> Res<B::ErrorType> {
        if !self.rasterise {
            return self.inner.draw_text(text, style, pos);
        }
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        let size = style.size();
        let (width, ascent, height) = measure(text, size);
        let dx = match style.anchor().h_pos {
            HPos::Left => 0,
            HPos::Right => -width,
            HPos::Center => -width / 2,
        };
        let dy = match style.anchor().v_pos {
            VPos::Top => 0,
            VPos::Center => -height / 2,
            VPos::Bottom => -height,
        };
        let trans = style.transform();
        let f = font().as_scaled(PxScale::from(size as f32));
        let mut pen = 0.0f32;
        let mut prev = None;
        let mut pixels = Vec::new();
        for c in text.chars() {
            let id = f.glyph_id(c);
            if let Some(p) = prev {
                pen += f.kern(p, id);
            }
            let glyph = id.with_scale_and_position(f.scale(), point(pen, ascent as f32));
            if let Some(outline) = font().outline_glyph(glyph) {
                let b = outline.px_bounds();
                outline.draw(|x, y, coverage| {
                    pixels.push((
                        b.min.x as i32 + x as i32,
                        b.min.y as i32 + y as i32,
                        coverage,
                    ));
                });
            }
            pen += f.h_advance(id);
            prev = Some(id);
        }
        for (x, y, coverage) in pixels {
            if coverage <= 0.0 {
                continue;
            }
            let (x, y) = trans.transform(x + dx, y + dy);
            let c = BackendColor {
                alpha: color.alpha * f64::from(coverage.min(1.0)),
                rgb: color.rgb,
            };
            self.inner.draw_pixel((pos.0 + x, pos.1 + y), c)?;
        }
        Ok(())
    }
}
