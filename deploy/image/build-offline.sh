#!/usr/bin/env bash
# Builds the kgstream image without pulling a base image: the seven static
# binaries are built here with the local Go toolchain and packed onto an
# empty (scratch) base with buildah. Usage:
#   deploy/image/build-offline.sh [TAG]      (default kgstream:offline)
# Needs go and buildah; runs rootless or as root (--isolation chroot).
set -euo pipefail
tag=${1:-kgstream:offline}
root=$(cd "$(dirname "$0")/../.." && pwd)
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT

fs="$ctx/rootfs"
mkdir -p "$fs/usr/local/bin" "$fs/tmp" "$fs/etc/ssl/certs" "$ctx/data"
cd "$root"
CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -ldflags='-s -w' -o "$fs/usr/local/bin/" \
  ./cmd/kgstream \
  ./services/gateway/cmd/gateway \
  ./services/extractor/cmd/extractor \
  ./services/resolver/cmd/resolver \
  ./services/clusterer/cmd/clusterer \
  ./services/reporter/cmd/reporter \
  ./services/query/cmd/query
chmod 1777 "$fs/tmp"
# The same user distroless calls nonroot, and the CA bundle for HTTPS
# endpoints (LLM, embeddings, Weaviate).
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$fs/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$fs/etc/group"
if [ -r /etc/ssl/certs/ca-certificates.crt ]; then
  cp /etc/ssl/certs/ca-certificates.crt "$fs/etc/ssl/certs/"
fi
cp deploy/image/Containerfile.prebuilt "$ctx/Containerfile"
buildah bud --isolation chroot -f "$ctx/Containerfile" -t "$tag" "$ctx"
