# The exported model and its sample digits as an image, for Kubernetes pods (`mnist-bench k8s`): an
# initContainer runs `cp -R /models/. <emptyDir>/` from it (docs/serving-config.md#kubernetes).
# After `make export`, from the repository root:
#
#   docker build -f docker/models.Dockerfile --build-arg BASE_IMAGE=busybox:1.37.0 \
#       -t mnist-serving-models:0.1.0 .
#
# then push it where the cluster pulls from (or `kind load docker-image mnist-serving-models:0.1.0`).
# Versions are pinned in docker/.env (MODELS_BASE_IMAGE, MODELS_IMAGE).
ARG BASE_IMAGE=busybox:1.37.0
FROM ${BASE_IMAGE}

# models/ is what `make export` writes: mnist/<version>/ (the SavedModel) and mnist-samples.npz.
COPY models/ /models/
