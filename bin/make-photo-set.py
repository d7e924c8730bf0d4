#!/usr/bin/python3
"""Cuts a photo set for bin/bench-images out of real photographs: one subfolder per source photo
(the class), each holding random crops of it (a random box of 35-100% of its shorter side, a random
aspect ratio 3/4-4/3), resized so the longer side is 300-600 px and re-encoded as JPEG quality
75-95: ImageNet-like sizes and qualities, every file a different size.

  /usr/bin/python3 bin/make-photo-set.py SRC_DIR OUT_DIR [PER_CLASS]
"""
import os
import random
import sys
from PIL import Image

src, out = sys.argv[1], sys.argv[2]
per_class = int(sys.argv[3]) if len(sys.argv) > 3 else 50
rng = random.Random(33)
photos = sorted(f for f in os.listdir(src) if f.lower().endswith((".jpg", ".jpeg")))
if not photos:
    sys.exit(f"no JPEG photos in {src}")
for name in photos:
    img = Image.open(os.path.join(src, name)).convert("RGB")
    W, H = img.size
    cls = os.path.join(out, os.path.splitext(name)[0].lower())
    os.makedirs(cls, exist_ok=True)
    for k in range(per_class):
        side = min(W, H) * rng.uniform(0.35, 1.0)
        ratio = rng.uniform(3 / 4, 4 / 3)
        w = min(W, int(side * ratio ** 0.5))
        h = min(H, int(side / ratio ** 0.5))
        x, y = rng.randint(0, W - w), rng.randint(0, H - h)
        longer = rng.randint(300, 600)
        s = longer / max(w, h)
        crop = img.crop((x, y, x + w, y + h)).resize((max(1, round(w * s)), max(1, round(h * s))), Image.BILINEAR)
        crop.save(os.path.join(cls, f"{k:04d}.jpg"), quality=rng.randint(75, 95))
print(f"{len(photos)} classes x {per_class} photos in {out}")
