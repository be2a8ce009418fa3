# syntax=docker/dockerfile:1
# HMS Gateway image. Config, topologies and secrets are mounted at /etc/hms-gateway at run time
# (Helm chart or `docker run -v`); nothing site-specific is baked into the image.

# ---- builder: builds the project's wheel and installs it into a self-contained venv ----------
FROM python:3.11-slim AS builder

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# A C compiler for the Thrift translation's extension (gateway/thrift/_speedups.c), and MIT
# Kerberos' headers and krb5-config for pyspnego[kerberos]'s gssapi and krb5, which build from
# source; the runtime stage gets the built venv only. Debian's current gcc is what the base
# image's Python expects.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev libkrb5-dev \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /src
COPY pyproject.toml README.md setup.py ./
COPY gateway ./gateway

# Wheel first, then install only that wheel and its runtime dependencies (no [test]/[demo] extras;
# the demo and the client distribution, demo/ and clients/, are not in the build context).
RUN python -m pip wheel --no-deps --wheel-dir /wheels . \
 && python -m venv /opt/hms-gateway \
 && /opt/hms-gateway/bin/pip install /wheels/*.whl \
 && /opt/hms-gateway/bin/pip uninstall --yes pip setuptools wheel
# The HEALTHCHECK's probe travels with the venv into the runtime stage.
COPY docker/healthcheck.py /opt/hms-gateway/healthcheck.py

# ---- runtime ---------------------------------------------------------------------------------
FROM python:3.11-slim

LABEL org.opencontainers.image.title="hms-gateway" \
      org.opencontainers.image.description="Knox-style authenticating HTTPS gateway for the Apache Hive Metastore" \
      org.opencontainers.image.licenses="Apache-2.0"

# The Kerberos libraries the venv's gssapi and krb5 extensions link against (SPNEGO, SASL to a
# Kerberized metastore), and Cyrus SASL with its DIGEST-MD5 mechanism (the end users' connections
# to a Kerberized HMS, loaded by gateway/upstream/cyrus.py); libraries only, no headers or compiler.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends libgssapi-krb5-2 libkrb5-3 libk5crypto3 \
      libsasl2-2 libsasl2-modules \
 && rm -rf /var/lib/apt/lists/*

# Numeric UID so Kubernetes runAsNonRoot can verify it without resolving /etc/passwd.
RUN groupadd --system --gid 10001 hmsgw \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin hmsgw \
 && mkdir -p /etc/hms-gateway

COPY --from=builder /opt/hms-gateway /opt/hms-gateway

# Bytecode is precompiled at install; the root filesystem may be read-only at run time.
# glibc's mmap threshold is pinned: otherwise, after large replies, it grows and multi-megabyte
# buffers come from the heap and are never returned (docs/performance.md, Soak).
ENV PATH="/opt/hms-gateway/bin:${PATH}" \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    MALLOC_MMAP_THRESHOLD_=131072

USER 10001:10001
WORKDIR /tmp

# 8443: HTTPS gateway; 9464: management (/metrics, /healthz, /readyz), plain HTTP.
EXPOSE 8443 9464

# slim has no curl: the venv's interpreter probes /healthz on the management port that the
# mounted gateway file configures ($HMS_GATEWAY_CONFIG or /etc/hms-gateway/gateway.yaml).
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["/opt/hms-gateway/bin/python", "/opt/hms-gateway/healthcheck.py"]

ENTRYPOINT ["hms-gateway"]
CMD ["serve", "--config", "/etc/hms-gateway/gateway.yaml"]
