# syntax=docker/dockerfile:1
# Multi-stage build of the single userland binary on a distroless static
# base, non-root. `make image` builds an equivalent OCI archive without a
# container engine (internal/image).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/userland-dev/userland/internal/version.Version=${VERSION} -X github.com/userland-dev/userland/internal/version.Commit=${COMMIT}" \
      -o /out/userland ./cmd/userland

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
ARG COMMIT=unknown
LABEL org.opencontainers.image.title="userland" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}" \
      org.opencontainers.image.source="https://github.com/userland-dev/userland" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/userland /usr/local/bin/userland
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/userland"]
