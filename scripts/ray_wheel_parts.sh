#!/usr/bin/env bash
# Ray for the GPU box, in two parts that each fit one device call (64 MiB a call; Ray's wheel is ~79 MB).
#
#   bash scripts/ray_wheel_parts.sh      # here, on a machine with a package index
#
# writes (folders .gitignore keeps out of git: /.ray1/ and /.ray2/)
#   .ray1/ray.whl.part-aa                              the first 40 MB of Ray's cp312 wheel
#   .ray2/ray.whl.part-ab  .ray2/ray.whl.sha256        the rest, and the whole wheel's hash
#   .ray2/*.whl                                        Ray's dependencies the box lacks (~4 MB)
#
# Then, while the machine stays warm (30 s idle), two consecutive calls (docs/design/cluster.md):
#   1. carry [".ray1"]:                 mkdir -p /tmp/ray-parts && cp .ray1/* /tmp/ray-parts/
#   2. carry [".whl", ".kb", ".ray2"]:  bash scripts/ray_wheel_parts.sh --assemble && <the run>
# --assemble joins the parts, checks the hash, and installs Ray and its dependencies into /tmp/site
# beside the other wheels (.whl: ../shared/gpu-box/wheels.txt and gpu-box-extra-wheels.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
NAME=ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl

if [ "${1:-}" = "--assemble" ]; then
    parts=/tmp/ray-parts
    [ -f "$parts/ray.whl.part-aa" ] || { echo "no $parts/ray.whl.part-aa: the first call (carry .ray1) did not run on this machine" >&2; exit 2; }
    mkdir -p /tmp/ray-wheel
    cat "$parts/ray.whl.part-aa" .ray2/ray.whl.part-ab > "/tmp/ray-wheel/$NAME"
    (cd /tmp/ray-wheel && sed "s/ray.whl\$/$NAME/" "$OLDPWD/.ray2/ray.whl.sha256" | sha256sum -c --quiet) \
        || { echo "the joined wheel's hash differs from the one recorded: parts from different downloads?" >&2; exit 2; }
    shopt -s nullglob
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        .whl/*.whl .ray2/*.whl "/tmp/ray-wheel/$NAME"
    echo "ray installed into /tmp/site: export PYTHONPATH=/tmp/site:\$PWD"
    exit 0
fi

rm -rf .ray1 .ray2 /tmp/ray-download
mkdir -p .ray1 .ray2 /tmp/ray-download
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 -d /tmp/ray-download \
    -r scripts/gpu-box-ray-wheels.txt
mv /tmp/ray-download/ray-*.whl "/tmp/ray-download/$NAME.full"
mv /tmp/ray-download/*.whl .ray2/
(cd /tmp/ray-download && sha256sum "$NAME.full" | sed "s/$NAME.full\$/ray.whl/") > .ray2/ray.whl.sha256
split -b 40000000 "/tmp/ray-download/$NAME.full" /tmp/ray-download/ray.whl.part-
mv /tmp/ray-download/ray.whl.part-aa .ray1/
mv /tmp/ray-download/ray.whl.part-ab .ray2/
[ ! -e /tmp/ray-download/ray.whl.part-ac ] || { echo "Ray's wheel needs three parts now: raise the split size" >&2; exit 2; }
du -sh .ray1 .ray2
