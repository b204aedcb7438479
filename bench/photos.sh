#!/usr/bin/env bash
# Builds an ImageFolder tree of REAL photographs (not synthetic) for benchmarking conveyor
# against PyTorch's DataLoader on camera-sized images:
#
#   bench/photos.sh [DIR]          # DIR defaults to /tmp/conveyor-photos
#   bench/compare.sh DIR ...       # then, e.g.
#
# Sources: photographs shipped by Debian bookworm wallpaper packages (all Architecture: all,
# no dependencies), picked by eye; illustrations, renders and gradients in the same packages
# are left out. Where a package ships one picture at several resolutions only the largest is
# taken. Classes are the source packages:
#   kde_plasma/   plasma-workspace-wallpapers   11 photos, 2560x1600 JPEG (1 grayscale)
#   lomiri/       lomiri-wallpapers-16.04, -20.04  15 photos, 1365x1074 .. 6028x3391 JPEG
#                 (Ubuntu wallpaper-contest photos, mostly progressive)
#   mate_nature/  mate-backgrounds (nature/)    12 photos, 1280x1024 .. 2560x1920 JPEG
# 38 distinct photographs, all JPEG as shipped.
#
# DERIVED FILES: the packages ship no photographic PNG or WebP, so for format variety this
# script also writes full-size re-encodings of some of those JPEGs next to their originals,
# same stem, new extension (the same picture twice, in two formats):
#   WEBP_LIST: lossy WebP (cwebp -q 85), plus one lossless WebP (cwebp -lossless) of FallenLeaf
#   PNG_LIST:  PNG (python3 PIL, RGB or L as decoded, compress_level 6)
# PHOTOS_DERIVED=0 skips them (38 JPEGs only). With them: 38 JPEG + 14 WebP + 8 PNG = 60.
#
# The tree (bookworm, with derived files): 60 files, 107 MB (JPEG 32.5, WebP 11.2, PNG 63.1);
# 1280x1024 (1.3 MP) .. 6028x3391 (20.4 MP), median 2560x1600 (4.1 MP); 10 files >= 12 MP
# (4 distinct photos); 16 of 38 JPEGs progressive; JPEG chroma 4:2:0 x16, 4:2:2 x12,
# 4:4:4 x9, grayscale x1; 4 portrait; no EXIF rotation. ~45 s to build, mostly PNG encoding.
#
# Install: as root with apt-get, the packages are installed (apt-get install
# --no-install-recommends; 168 MB of .debs, 171 MB installed, 94 MB of it plasma's).
# Otherwise, if they are missing, apt-get download + dpkg-deb -x unpacks them under
# ${XDG_CACHE_HOME:-~/.cache}/conveyor-photos without installing anything; failing that it
# prints what to install. Derived files need cwebp (package webp) and python3-pil.
#
# Idempotent: the tree is built in a temporary sibling folder, then replaces DIR. DIR is
# only ever removed if it is empty or holds the marker file .conveyor-photos (a file at
# the root is ignored by torchvision's and conveyor's ImageFolder listing).
set -euo pipefail

DIR=${1:-/tmp/conveyor-photos}
DIR=${DIR%/}
DERIVED=${PHOTOS_DERIVED:-1}
PKGS=(plasma-workspace-wallpapers mate-backgrounds lomiri-wallpapers-16.04 lomiri-wallpapers-20.04)
TOOL_PKGS=(webp python3-pil)

# Plasma themes that are photographs; each theme's largest contents/images/WxH.jpg is taken.
PLASMA=(BytheWater ColdRipple ColorfulCups DarkestHour EveningGlow FallenLeaf Grey Kite
        OneStandsOut Path summer_1am)
LOMIRI16=(Bridge_by_Sander_Klootwijk Dragonfly_by_Bolly Picture_0B_by_freespace
          Picture_1A_by_freespace Wine_by_Jakkub_Mede aitzgorri_by_Aitzol_Berasategi
          analogpattern_by_Peter_Nerlich free_by_Peter_Nerlich friends_by_Aitzol_Berasategi
          greentock_by_Peter_Nerlich life_by_Aitzol_Berasategi
          picosdeeuropa_by_Aitzol_Berasategi seeding_by_Clements_Engelhardt
          sunset_by_Aitzol_Berasategi)          # not umang_by_Abhishek_Mudgal (a gradient)
LOMIRI20=(Kleiber_by_Lukas_Baubkus)             # the others are illustrations / digital art
MATE=(Aqua Blinds Dune FreshFlower Garden GreenMeadow LadyBird RainDrops Storm TwoWings
      Wood YellowFlower)

# Derived files, as class/stem of a JPEG above.
WEBP_LIST=(lomiri/Kleiber_by_Lukas_Baubkus lomiri/seeding_by_Clements_Engelhardt
           lomiri/Dragonfly_by_Bolly lomiri/sunset_by_Aitzol_Berasategi
           lomiri/Bridge_by_Sander_Klootwijk lomiri/picosdeeuropa_by_Aitzol_Berasategi
           lomiri/life_by_Aitzol_Berasategi kde_plasma/EveningGlow kde_plasma/Path
           kde_plasma/summer_1am mate_nature/LadyBird mate_nature/TwoWings mate_nature/Storm)
WEBP_LOSSLESS=kde_plasma/FallenLeaf
PNG_LIST=(lomiri/Kleiber_by_Lukas_Baubkus lomiri/Dragonfly_by_Bolly lomiri/Wine_by_Jakkub_Mede
          lomiri/friends_by_Aitzol_Berasategi kde_plasma/OneStandsOut kde_plasma/ColorfulCups
          kde_plasma/Grey mate_nature/Garden)

log() { echo "photos: $*" >&2; }
die() { log "$*"; exit 1; }

# --- sources: installed packages, or unpacked .debs in a cache ---------------------------
ROOT=""      # prefix of /usr/share
missing() { local m=() p; for p in "$@"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || m+=("$p"); done; echo "${m[*]}"; }
need=$(missing "${PKGS[@]}")
if [ "$DERIVED" = 1 ]; then need_tools=$(missing "${TOOL_PKGS[@]}"); else need_tools=""; fi
if [ -n "$need$need_tools" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  log "installing: $need $need_tools"
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $need $need_tools >/dev/null; then
    apt-get update >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $need $need_tools >/dev/null
  fi
  need="" need_tools=""
fi
if [ -n "$need" ]; then
  if command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null; then
    ROOT=${XDG_CACHE_HOME:-$HOME/.cache}/conveyor-photos/root
    mkdir -p "$ROOT/../debs"
    for p in "${PKGS[@]}"; do   # all of them, so that one prefix holds every file
      if [ ! -e "$ROOT/.$p" ]; then
        log "not installed, unpacking into $ROOT: $p"
        (cd "$ROOT/../debs" && apt-get download "$p" >/dev/null) || die "apt-get download $p failed; install it: apt-get install $p"
        dpkg-deb -x "$(ls -t "$ROOT/../debs/${p}"_*.deb | head -1)" "$ROOT"
        touch "$ROOT/.$p"
      fi
    done
  else
    die "missing packages; install: apt-get install --no-install-recommends $need $need_tools"
  fi
fi
if [ "$DERIVED" = 1 ]; then
  command -v cwebp >/dev/null || die "cwebp missing: apt-get install webp (or PHOTOS_DERIVED=0)"
  PY=""   # python3-pil is Debian's: prefer /usr/bin/python3 over a pyenv/venv python3
  for c in /usr/bin/python3 python3; do
    if "$c" -c 'import PIL' 2>/dev/null; then PY=$c; break; fi
  done
  [ -n "$PY" ] || die "python3 PIL missing: apt-get install python3-pil (or PHOTOS_DERIVED=0)"
fi

# --- the tree ----------------------------------------------------------------------------
if [ -e "$DIR" ] && [ ! -e "$DIR/.conveyor-photos" ] && [ -n "$(ls -A "$DIR" 2>/dev/null)" ]; then
  die "$DIR exists and was not made by this script (no .conveyor-photos marker); not touching it"
fi
mkdir -p "$(dirname "$DIR")"
TMP=$(mktemp -d "$DIR.tmp.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

n=0
put() { # put CLASS SRC NAME
  [ -f "$2" ] || die "missing $2 (package contents changed?)"
  mkdir -p "$TMP/$1"
  cp "$2" "$TMP/$1/$3"
  n=$((n + 1))
}
S=$ROOT/usr/share
for t in "${PLASMA[@]}"; do
  # files are named WxH.jpg; the smaller ones are mostly symlinks to the same picture
  best=$(cd "$S/wallpapers/$t/contents/images" && ls *.jpg | awk -Fx '{f=$0; sub(/\.jpg$/,"",$2); print $1*$2, f}' | sort -n | tail -1 | cut -d' ' -f2)
  put kde_plasma "$S/wallpapers/$t/contents/images/$best" "$t.jpg"
done
for f in "${LOMIRI16[@]}" "${LOMIRI20[@]}"; do put lomiri "$S/backgrounds/$f.jpg" "$f.jpg"; done
for f in "${MATE[@]}"; do put mate_nature "$S/backgrounds/mate/nature/$f.jpg" "$f.jpg"; done
log "$n photographs copied"

if [ "$DERIVED" = 1 ]; then
  for s in "${WEBP_LIST[@]}"; do cwebp -quiet -q 85 -metadata none "$TMP/$s.jpg" -o "$TMP/$s.webp"; done
  cwebp -quiet -lossless -metadata none "$TMP/$WEBP_LOSSLESS.jpg" -o "$TMP/$WEBP_LOSSLESS.webp"
  "$PY" - "$TMP" "${PNG_LIST[@]}" <<'EOF'
import sys
from PIL import Image
Image.MAX_IMAGE_PIXELS = None
root = sys.argv[1]
for s in sys.argv[2:]:
    with Image.open(f"{root}/{s}.jpg") as im:
        im.save(f"{root}/{s}.png", compress_level=6)
EOF
  log "$(( ${#WEBP_LIST[@]} + 1 )) WebP and ${#PNG_LIST[@]} PNG re-encodings written"
fi

echo "real photographs from Debian packages: ${PKGS[*]}; made by bench/photos.sh" > "$TMP/.conveyor-photos"
chmod -R a+rX "$TMP"
rm -rf "$DIR"
mv "$TMP" "$DIR"
trap - EXIT
log "$DIR: $(find "$DIR" -type f ! -name .conveyor-photos | wc -l) images in $(find "$DIR" -mindepth 1 -maxdepth 1 -type d | wc -l) classes, $(du -sh "$DIR" | cut -f1)"
