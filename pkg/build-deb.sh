#!/usr/bin/env bash
# Builds the Debian package target/debian/tpslab_VERSION-1_ARCH.deb (prints its path on the
# last line of stdout):
#   1. the release binary (`cargo build --release --locked`; skipped with --no-build, which
#      packages the target/release/tpslab already there; with --profile NAME, target/NAME/'s:
#      tests/suite/package.rs packages the binary of the test build, `--profile suite`),
#   2. with it, into target/assets: a man page per command (`tpslab man --dir`, gzipped as
#      Debian wants: -9, no name nor time stamp) and the bash, zsh and fish completions,
#   3. `cargo deb --no-build --strip` (the metadata is [package.metadata.deb] in
#      Cargo.toml: assets, copyright, changelog and maintainer scripts from pkg/debian/),
#      then DEBIAN/md5sums added (dpkg-deb -R, md5sum, dpkg-deb -b).
# Needs cargo-deb: `cargo install cargo-deb --locked` (.ci/run does it).
# Options: --no-build; --profile NAME (a Cargo profile, release by default); --fast (gzip
# instead of xz: 7.6 MB instead of 5.5, 5 s instead of 25 s on a busy 2-CPU host;
# tests/suite/package.rs); -o/--output DIR (default target/debian).
set -euo pipefail

build=1
profile=release
out=
compress=xz
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) build=0 ;;
    --fast) compress=gzip ;;
    --profile) profile="${2:?$1 needs a Cargo profile}"; shift ;;
    -o|--output) out="${2:?$1 needs a folder}"; shift ;;
    *) echo "build-deb.sh: unknown argument $1 (allowed: --no-build, --profile NAME, --fast, -o DIR)" >&2; exit 2 ;;
  esac
  shift
done
# -o DIR is the caller's (relative to where it was run), the rest the repository's.
if [ -n "$out" ]; then out="$(realpath -m -- "$out")"; fi
cd "$(dirname "$0")/.."
out="${out:-target/debian}"

if ! cargo deb --version >/dev/null 2>&1; then
  echo "build-deb.sh: cargo-deb is missing: cargo install cargo-deb --locked" >&2
  exit 1
fi

# The changelog's newest entry is the package's version: Cargo's plus revision 1.
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
entry=$(sed -n '1s/^tpslab (\([^)]*\)).*/\1/p' pkg/debian/changelog)
if [ "$entry" != "$version-1" ]; then
  echo "build-deb.sh: pkg/debian/changelog's newest entry is $entry, the package is $version-1: add an entry" >&2
  exit 1
fi

if [ "$build" = 1 ]; then
  cargo build --profile "$profile" --locked --bin tpslab
fi
# The binary cargo-deb packages (it reads CARGO_TARGET_DIR too).
# (Cargo's folder of a profile: dev's and test's is debug, bench's release.)
case "$profile" in
  dev|test) dir=debug ;;
  bench) dir=release ;;
  *) dir=$profile ;;
esac
bin="${CARGO_TARGET_DIR:-target}/$dir/tpslab"
[ -x "$bin" ] || { echo "build-deb.sh: no $bin (build it, or drop --no-build)" >&2; exit 1; }

assets=target/assets
rm -rf "$assets"
mkdir -p "$assets/man" "$assets/completions"
"$bin" man --dir "$assets/man" 2>/dev/null
gzip -9n "$assets"/man/*.1
"$bin" completions bash > "$assets/completions/tpslab.bash"
"$bin" completions zsh > "$assets/completions/_tpslab"
"$bin" completions fish > "$assets/completions/tpslab.fish"

mkdir -p "$out"
# The files' time stamps: the commit's time (cargo-deb otherwise takes Cargo.toml's day, so
# a package built later that day has pages no newer than the cat pages man-db cached from
# the one before, and man shows the old text).
SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}"
export SOURCE_DATE_EPOCH
# --fast: the package is compressed again below anyway.
# (cargo-deb reads the asset target/release/tpslab from the profile's folder.)
deb=$(cargo deb --no-build --profile "$profile" --strip --fast --output "$out" | tail -n 1)

# cargo-deb writes no DEBIAN/md5sums: added here, for `dpkg --verify tpslab` and debsums.
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
# mktemp's folder is 0700: it becomes the archive's ./ (dpkg-deb -b keeps its mode).
chmod 0755 "$tree"
dpkg-deb -R "$deb" "$tree"
(cd "$tree" && find usr -type f -print0 | sort -z | xargs -0 md5sum > DEBIAN/md5sums)
chmod 644 "$tree/DEBIAN/md5sums"
dpkg-deb --root-owner-group -Z"$compress" -b "$tree" "$deb" >/dev/null
echo "$deb"
