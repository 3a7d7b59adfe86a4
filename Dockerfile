# syntax=docker/dockerfile:1
# Shelf's container image: `shelf api` on 0.0.0.0:8080 as a non-root user, data in /data.
# Build and tag with the crate's semantic version (docs/operations.md, "Container"):
#   VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
#   docker build --build-arg SHELF_VERSION=$VERSION -t shelf:$VERSION .
# compose.yaml runs it hardened (read-only root, no-new-privileges, tmpfs /tmp, rotated logs).

ARG RUST_VERSION=1.95
ARG DEBIAN_RELEASE=bookworm

# --- builder: the Rust toolchain plus the headers leptess links against ---
FROM rust:${RUST_VERSION}-slim-${DEBIAN_RELEASE} AS builder
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libtesseract-dev libleptonica-dev libclang-dev pkg-config \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# target/ is dropped in the same step: the stage's layer keeps the binary, not 2 GB of objects.
RUN cargo build --release --locked -p shelf-cli \
 && install -m 0755 target/release/shelf /usr/local/bin/shelf \
 && rm -rf target

# --- runtime: Debian slim with the OCR and PDF tools and libraries, nothing to build with ---
FROM debian:${DEBIAN_RELEASE}-slim AS runtime
ARG SHELF_VERSION=0.1.0
LABEL org.opencontainers.image.title="shelf" \
      org.opencontainers.image.description="Document ingestion, cleaning, classification and search" \
      org.opencontainers.image.version="${SHELF_VERSION}" \
      org.opencontainers.image.licenses="MIT OR Apache-2.0"
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libtesseract5 liblept5 tesseract-ocr tesseract-ocr-eng tesseract-ocr-osd poppler-utils \
      ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 shelf \
 && useradd --system --uid 10001 --gid shelf --home-dir /data --shell /usr/sbin/nologin shelf \
 && install -d -o shelf -g shelf -m 0750 /data
COPY --from=builder /usr/local/bin/shelf /usr/local/bin/shelf
ENV SHELF_DATA_DIR=/data \
    SHELF_API_HOST=0.0.0.0 \
    SHELF_API_PORT=8080 \
    OMP_THREAD_LIMIT=1
VOLUME ["/data"]
EXPOSE 8080
USER shelf:shelf
WORKDIR /data
# `shelf health` GETs http://127.0.0.1:$SHELF_API_PORT/health: no curl in the image.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["shelf", "health", "--timeout", "4"]
ENTRYPOINT ["shelf"]
CMD ["api"]
