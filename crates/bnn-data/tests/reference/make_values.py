#!/usr/bin/env python3
"""Independent reference values for the bnn-data tests (numpy, scipy, colorsys).

Run from the crate folder:  python3 tests/reference/make_values.py
Writes into tests/data/:
  svhn_tiny.mat, svhn_tiny_z.mat  SVHN-layout MAT v5 files written by scipy.io.savemat
                                  (uncompressed / zlib-compressed), X uint8 [32,32,3,5],
                                  y double [5,1] in 1..10
  svhn_tiny_expected.txt          labels (10 -> 0) and the CHW bytes numpy derives
  reference.txt                   reflect padding, bilinear resize, colour operations
"""
import colorsys
import os

import numpy as np
import scipy.io
import scipy.ndimage

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data")


def line(name, values):
    return name + " " + " ".join(repr(float(v)) for v in np.ravel(values)) + "\n"


def svhn():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=(32, 32, 3, 5), dtype=np.uint8)
    y = np.array([[1.0], [10.0], [3.0], [10.0], [9.0]])
    for name, compress in (("svhn_tiny.mat", False), ("svhn_tiny_z.mat", True)):
        scipy.io.savemat(os.path.join(OUT, name), {"X": x, "y": y}, do_compression=compress,
                         format="5")
    chw = x.transpose(3, 2, 0, 1)  # [N, C, H, W]
    labels = np.where(y[:, 0] == 10, 0, y[:, 0]).astype(int)
    with open(os.path.join(OUT, "svhn_tiny_expected.txt"), "w") as f:
        f.write("labels " + " ".join(str(v) for v in labels) + "\n")
        for i in range(chw.shape[0]):
            f.write(f"image{i} " + " ".join(str(v) for v in chw[i].ravel()) + "\n")


def reference():
    out = ""
    # Reflect padding (torch 'reflect' == numpy 'reflect'), 1x3x4 image padded by 2.
    img = np.arange(12, dtype=np.float64).reshape(3, 4) / 11.0
    out += line("reflect_input", img)
    out += line("reflect_pad2", np.pad(img, 2, mode="reflect"))
    # Bilinear, half-pixel centres, edge clamp == torch interpolate(align_corners=False).
    src = np.array([[0.0, 0.2, 0.9], [0.5, 1.0, 0.1]])
    out += line("resize_input", src)
    up = scipy.ndimage.zoom(src, (5 / 2, 7 / 3), order=1, mode="nearest", grid_mode=True)
    out += line("resize_5x7", up)
    big = np.linspace(0, 1, 48).reshape(6, 8) ** 2
    out += line("resize_big_input", big)
    down = scipy.ndimage.zoom(big, (4 / 6, 4 / 8), order=1, mode="nearest", grid_mode=True)
    out += line("resize_4x4", down)
    # Colour ops on one 3x1x2 RGB image (torchvision formulas, clamped to [0, 1]).
    rgb = np.array([[0.1, 0.7], [0.4, 0.2], [0.9, 0.05]])  # [C, W] with H = 1
    out += line("color_input", rgb)
    gray = 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2]
    out += line("brightness_1.3", np.clip(rgb * 1.3, 0, 1))
    out += line("contrast_0.6", np.clip(0.6 * rgb + 0.4 * gray.mean(), 0, 1))
    out += line("saturation_1.4", np.clip(1.4 * rgb + (-0.4) * gray[None, :], 0, 1))
    shifted = np.zeros_like(rgb)
    for j in range(rgb.shape[1]):
        h, s, v = colorsys.rgb_to_hsv(*rgb[:, j])
        shifted[:, j] = colorsys.hsv_to_rgb((h + 0.08) % 1.0, s, v)
    out += line("hue_0.08", shifted)
    shifted = np.zeros_like(rgb)
    for j in range(rgb.shape[1]):
        h, s, v = colorsys.rgb_to_hsv(*rgb[:, j])
        shifted[:, j] = colorsys.hsv_to_rgb((h - 0.1) % 1.0, s, v)
    out += line("hue_-0.1", shifted)
    with open(os.path.join(OUT, "reference.txt"), "w") as f:
        f.write(out)


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    svhn()
    reference()
