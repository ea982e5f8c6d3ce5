# tpslab's container image: what `tpslab fleet k8s` runs as its agents (and any other
# command: `docker run --rm --network host tpslab tpslab doctor`).
#   docker build -t tpslab:latest .
# The build needs the Rust and Debian images and crates.io; the result is Debian's slim
# image with the one static-enough binary (SQLite is bundled) and iproute2. The binary is
# built as the Debian package's is (pkg/build-deb.sh: cargo build --release --locked
# --bin tpslab, then stripped).

FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin tpslab \
 && strip target/release/tpslab

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends iproute2 ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/tpslab /usr/local/bin/tpslab
# Records and history stay in the container unless a volume is mounted here.
ENV XDG_DATA_HOME=/var/lib/tpslab
RUN mkdir -p /var/lib/tpslab
CMD ["tpslab", "--help"]
