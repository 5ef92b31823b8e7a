# syntax=docker/dockerfile:1
# kgstream and the six service binaries, static, on distroless (non-root).
#   docker build -t kgstream:dev .      (or: buildah bud -t kgstream:dev .)
# Where no registry is reachable, deploy/image/build-offline.sh packs binaries
# built on the host onto an empty base instead.
ARG GO_VERSION=1.26

FROM docker.io/library/golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-buildvcs=false
# Module files first, so the download layer survives source edits. The
# deploy/k8s module (the manifests' test) is not part of the workspace.
COPY go.work go.work.sum ./
COPY pkg/go.mod pkg/go.sum pkg/
COPY cmd/kgstream/go.mod cmd/kgstream/go.sum cmd/kgstream/
COPY services/gateway/go.mod services/gateway/go.sum services/gateway/
COPY services/extractor/go.mod services/extractor/go.sum services/extractor/
COPY services/resolver/go.mod services/resolver/go.sum services/resolver/
COPY services/clusterer/go.mod services/clusterer/go.sum services/clusterer/
COPY services/reporter/go.mod services/reporter/go.sum services/reporter/
COPY services/query/go.mod services/query/go.sum services/query/
RUN go mod download
COPY pkg pkg
COPY cmd cmd
COPY services services
RUN go build -trimpath -ldflags='-s -w' -o /out/ \
      ./cmd/kgstream \
      ./services/gateway/cmd/gateway \
      ./services/extractor/cmd/extractor \
      ./services/resolver/cmd/resolver \
      ./services/clusterer/cmd/clusterer \
      ./services/reporter/cmd/reporter \
      ./services/query/cmd/query \
 && mkdir -p /data && chown 65532:65532 /data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ /usr/local/bin/
COPY --from=build --chown=65532:65532 /data /data
USER 65532:65532
WORKDIR /data
ENV KG_DATA_DIR=/data
VOLUME /data
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/kgstream"]
CMD ["up", "--data", "/data", "--http", "0.0.0.0:8080"]
