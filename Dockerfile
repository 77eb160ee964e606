# Image for both processes: `python -m webhook` and `python -m reconciler` (also
# `rollgate webhook|reconciler|certs`)
# (manifests/ set the command). Runs as a non-root user with a read-only root
# filesystem; /tmp is an emptyDir in the Deployments.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
# requirements.lock: the exact versions (`make lock`), so a rebuild installs the same.
COPY pyproject.toml README.md requirements.lock ./
COPY schemas schemas
COPY webhook webhook
COPY reconciler reconciler
COPY certs certs
COPY kubekit kubekit
COPY rollgate rollgate
RUN pip install --no-cache-dir -c requirements.lock . && pip check && rm -rf /root/.cache
USER 65532:65532
