# Locust load-generator worker for the MNIST TF Serving benchmark, to run workers on machines
# other than the one driving the sweep. Build from the repository root:
#
#   docker compose -f docker/loadgen.compose.yaml --env-file docker/.env build
#
# The project's pinned dependencies (requirements.lock) are installed first so code changes do
# not reinstall TensorFlow.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm
FROM ${PYTHON_IMAGE}

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    TF_CPP_MIN_LOG_LEVEL=2

WORKDIR /app
COPY requirements.lock ./
RUN python -m pip install --upgrade pip && python -m pip install -r requirements.lock

COPY pyproject.toml ./
COPY model_export/ model_export/
COPY serving/ serving/
COPY loadtest/ loadtest/
RUN python -m pip install --no-deps .

# The samples file (models/mnist-samples.npz) is mounted at run time; results stay on the master.
RUN useradd --create-home locust
USER locust

ENV LOCUST_LOCUSTFILE=loadtest/load/locustfile.py \
    LOCUST_MODE_WORKER=true
ENTRYPOINT ["locust"]
