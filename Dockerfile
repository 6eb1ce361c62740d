# The kernel_env server on one GPU box (docs/design/deploy.md).
#
#   docker build -t kernel-env .        (or: openenv build -t kernel-env)
#   docker run --gpus all -p 8000:8000 -e KERNEL_ENV_TOKEN=... \
#       --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
#       --security-opt systempaths=unconfined kernel-env
#
# Settings are KERNEL_ENV_* variables, one per `kernel-env serve` flag (kernel_env/server/deploy.py).

# devel, not runtime: load_inline compiles the submissions with nvcc and the CUDA headers
ARG CUDA_IMAGE=nvidia/cuda:13.0.2-devel-ubuntu24.04
FROM ${CUDA_IMAGE}

# bubblewrap: the candidates' sandbox; g++ and ninja: load_inline's host compiler and build tool;
# python3-dev: the Python headers every torch extension includes; curl: the health check
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      bubblewrap g++ ninja-build python3 python3-dev python3-venv curl ca-certificates \
 && rm -rf /var/lib/apt/lists/*

# Ubuntu's Python refuses system-wide pip installs (PEP 668): the project gets a venv of its own
RUN python3 -m venv /opt/kernel_env
ENV PATH=/opt/kernel_env/bin:$PATH

# torch first, from the PyTorch CUDA 13.0 index: PyPI's torch==2.13.0 (the project's pin) is the CPU
# wheel. The same version from this index is 2.13.0+cu130, which satisfies the pin, so installing the
# project next keeps it (and the Triton it brings). Its own layer: source changes do not rebuild it.
ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX=https://download.pytorch.org/whl/cu130
RUN pip install --no-cache-dir --index-url ${TORCH_INDEX} torch==${TORCH_VERSION}

# the project from its own files (.dockerignore lets in only these), not editable, with Ray: the same
# image serves one box, or is a front door or a judge node of a Ray cluster (docs/design/cluster.md)
WORKDIR /opt/kernel_env/src
COPY pyproject.toml README.md ./
COPY kernel_env ./kernel_env
RUN pip install --no-cache-dir ".[cluster]" \
 && python -c "import torch, kernel_env.server.deploy; assert torch.version.cuda, 'a CPU build of torch'"

# candidates run as this user too; the judge's caches live in its home (mount a volume there to
# keep builds, reference times and precompiled headers across restarts)
RUN useradd --create-home --shell /usr/sbin/nologin kernel
USER kernel
WORKDIR /home/kernel

# Every setting explicit where a default would choose for the box: the image is for a GPU (a
# container started without one stops at start instead of judging on its CPU), and its sandbox is
# bubblewrap (if the container may not make namespaces the server stops at start with the reason,
# rather than running candidates unsandboxed; KERNEL_ENV_SANDBOX=none is the explicit way to accept
# that). No token here: one is passed at run time, and without it the 0.0.0.0 bind is refused.
ENV KERNEL_ENV_HOST=0.0.0.0 \
    KERNEL_ENV_PORT=8000 \
    KERNEL_ENV_DEVICE=cuda \
    KERNEL_ENV_SANDBOX=bwrap \
    KERNEL_ENV_CACHE=/home/kernel/.cache/kernel_env \
    PYTHONUNBUFFERED=1

EXPOSE 8000
# start-period: before it listens the server imports torch, asks the GPU's arch and probes the sandbox
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD curl -fsS "http://127.0.0.1:${KERNEL_ENV_PORT}/health" || exit 1

CMD ["python", "-m", "kernel_env.server.deploy"]
