# syntax=docker/dockerfile:1
#
# gorovod's container image: gorun, hello and allreduce_bench (static, pure
# Go) and mnist (cgo, OpenBLAS) in /usr/local/bin, run as the non-root user
# gorovod (uid and gid 1000) in /home/gorovod.
#
#   docker build -t gorovod .                             # Indexed Job, docker run
#   docker build -t gorovod:mpi --build-arg WITH_MPI=1 .  # + Open MPI and OpenSSH, for a Kubeflow MPIJob
#   docker build --build-arg WITH_DATA=0 ...              # without Fashion-MNIST (mnist trains on synthetic data)
#
#   docker run --rm gorovod                                 # hello alone: size=1 sum=1
#   docker run --rm gorovod gorun -np 2 mnist -epochs 1     # two ranks in one container
#
# The manifests that use it are in deploy/kubernetes (see its README).

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION}-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends libopenblas-dev liblapacke-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# The core and the small programs are pure Go; mnist multiplies matrices
# with OpenBLAS through cgo (it needs libopenblas0 and liblapacke at run time).
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/ ./cmd/gorun ./examples/hello ./examples/allreduce_bench \
 && CGO_ENABLED=1 go build -trimpath -ldflags='-s -w' -o /out/mnist ./examples/mnist

FROM debian:bookworm-slim
# WITH_DATA=1: Debian's dataset-fashion-mnist (30 MB) in /usr/share/datasets/fashion-mnist.
# WITH_MPI=1: openmpi-bin and OpenSSH for the MPI Operator's launcher and
# workers (deploy/kubernetes/mpijob.yaml); ranks never call MPI themselves.
ARG WITH_DATA=1
ARG WITH_MPI=0
RUN set -eux; \
    pkgs="libopenblas0 liblapacke"; \
    if [ "$WITH_DATA" = 1 ]; then pkgs="$pkgs dataset-fashion-mnist"; fi; \
    if [ "$WITH_MPI" = 1 ]; then pkgs="$pkgs openmpi-bin openssh-server openssh-client"; fi; \
    apt-get update; \
    apt-get install -y --no-install-recommends $pkgs; \
    rm -rf /var/lib/apt/lists/*; \
    if [ "$WITH_MPI" = 1 ]; then \
        mkdir -p /run/sshd; \
        ln -s /etc/gorovod/ssh_config /etc/ssh/ssh_config.d/gorovod.conf; \
    fi; \
    useradd --uid 1000 --user-group --create-home --shell /bin/bash gorovod
COPY deploy/docker/sshd_config deploy/docker/ssh_config /etc/gorovod/
COPY --from=build /out/ /usr/local/bin/
USER 1000:1000
WORKDIR /home/gorovod
CMD ["hello"]
