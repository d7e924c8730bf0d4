#!/usr/bin/python3
"""Makes the image fixtures of ImageResizeTest and ImageFormatsTest with PIL (run with /usr/bin/python3,
which has PIL; CI never runs this: the outputs are committed beside it).

  cd spark-trainer/src/test/resources/images && /usr/bin/python3 make_fixtures.py

Each expected image is raw bytes, HWC, 8 bits (.raw); cases.txt lists the resize cases, one a line:
  name source top left height width out_h out_w channels   (crop box then resize: RandomResizedCrop's resized_crop)
  name source shorter N out_h out_w channels               (Resize(N) then CenterCrop)
"""
import io
import numpy as np
from PIL import Image, ImageOps

rng = np.random.default_rng(33)

def photo(h, w):
    # smooth gradients plus texture plus noise: something resampling can get wrong
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    r = 127 + 100 * np.sin(x / 7.0) * np.cos(y / 11.0)
    g = 127 + 120 * np.sin((x + y) / 13.0)
    b = (x * 255.0 / w + y * 255.0 / h) / 2
    a = np.stack([r, g, b], axis=-1) + rng.normal(0, 18, (h, w, 3))
    return Image.fromarray(np.clip(a, 0, 255).astype(np.uint8), "RGB")

src = photo(61, 83)
src.save("src.png")
src.save("src.jpg", quality=92)
jpg = Image.open("src.jpg").convert("RGB")

def raw(img, name):
    open(name, "wb").write(np.asarray(img).tobytes())

cases = []
def crop_case(name, img, source, top, left, h, w, oh, ow):
    out = img.crop((left, top, left + w, top + h)).resize((ow, oh), Image.BILINEAR)
    raw(out, name + ".raw")
    ch = 1 if img.mode == "L" else 3
    cases.append(f"{name} {source} {top} {left} {h} {w} {oh} {ow} {ch}")

def shorter_case(name, img, source, n, oh, ow):
    w, h = img.size
    if w <= h:
        nw, nh = n, int(n * h / w)
    else:
        nh, nw = n, int(n * w / h)
    r = img.resize((nw, nh), Image.BILINEAR)
    top = int(round((nh - oh) / 2.0))
    left = int(round((nw - ow) / 2.0))
    raw(r.crop((left, top, left + ow, top + oh)), name + ".raw")
    ch = 1 if img.mode == "L" else 3
    cases.append(f"{name} {source} shorter {n} {oh} {ow} {ch}")

crop_case("down_whole", src, "src.png", 0, 0, 61, 83, 24, 24)
crop_case("down_box", src, "src.png", 5, 17, 40, 51, 16, 20)
crop_case("up_box", src, "src.png", 30, 40, 9, 13, 32, 32)
crop_case("mixed_box", src, "src.png", 1, 2, 55, 12, 20, 30)
crop_case("same_size", src, "src.png", 10, 10, 24, 24, 24, 24)
crop_case("grey_down", src.convert("L"), "src.png", 3, 4, 50, 70, 17, 23)
shorter_case("shorter_28_24", src, "src.png", 28, 24, 24)
shorter_case("shorter_61_40", src, "src.png", 61, 40, 40)
shorter_case("shorter_grey", src.convert("L"), "src.png", 32, 32, 32)
crop_case("jpeg_down", jpg, "src.jpg", 4, 6, 50, 70, 24, 24)
open("cases.txt", "w").write("\n".join(cases) + "\n")

# Odd formats: the image as PIL reads it, converted to RGB (and L), raw
small = photo(9, 13)
def save(img, name, **kw):
    img.save(name, **kw)

save(small.convert("L"), "grey.png")
raw(small.convert("L").convert("RGB"), "grey.rgb.raw")
la = small.convert("LA")
save(la, "grey_alpha.png")
raw(small.convert("L").convert("RGB"), "grey_alpha.rgb.raw")
rgba = small.convert("RGBA")
rgba.putalpha(Image.fromarray((np.arange(9 * 13) % 256).reshape(9, 13).astype(np.uint8)))
save(rgba, "rgba.png")
raw(small, "rgba.rgb.raw")
pal = small.convert("P", palette=Image.ADAPTIVE, colors=16)
save(pal, "palette.png")
raw(pal.convert("RGB"), "palette.rgb.raw")
# 16-bit grey: PIL writes mode I;16; expected: the nearest byte, round(v / 257)
v16 = (np.arange(9 * 13, dtype=np.uint32).reshape(9, 13) * 571 % 65536).astype(np.uint16)
Image.fromarray(v16, "I;16").save("grey16.png")
g8 = np.floor(v16.astype(np.float64) / 257 + 0.5).astype(np.uint8)
raw(Image.fromarray(np.stack([g8] * 3, -1), "RGB"), "grey16.rgb.raw")
# CMYK JPEG: refused with a clear message
save(small.convert("CMYK"), "cmyk.jpg", quality=95)
# EXIF-rotated JPEGs: expected is PIL's exif_transpose of PIL's decode
for o in (3, 6, 8):
    ex = Image.Exif()
    ex[0x0112] = o
    save(small, f"exif{o}.jpg", quality=95, exif=ex.tobytes())
    raw(ImageOps.exif_transpose(Image.open(f"exif{o}.jpg")).convert("RGB"), f"exif{o}.rgb.raw")
raw(Image.open("src.jpg").convert("RGB"), "src.jpg.rgb.raw")
# A truncated JPEG
data = open("src.jpg", "rb").read()
open("truncated.jpg", "wb").write(data[: len(data) // 2])
print("\n".join(cases))
