"""Which model versions are served, kept current by polling the model base paths.

Like TF Serving's FileSystemStoragePathSource: every `file_system_poll_wait_seconds` each
model's base path is listed; integer-named version directories (holding saved_model.pb) are the
versions on disk; the model's version policy (latest N by default, all, or specific) picks the
aspired ones. New aspired versions are loaded (and warmed up) before the ones that left are
unloaded, so a request always finds a version (TF Serving's availability-preserving policy).

Not for: running or validating requests.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

from serving.server.handling.errors import ServingError
from serving.server.runtimes.model_spec import ModelVersion

log = logging.getLogger("serving")

# What a source holds: loaded models, or (a frontend with a device owner) versions described by their signatures.
Version = TypeVar("Version", bound=ModelVersion)


@dataclass(frozen=True)
class ModelEntry:
    """One model to serve, as a ModelConfig names it."""

    name: str
    base_path: Path
    policy: str = "latest"  # "latest", "all" or "specific"
    num_versions: int = 1  # for "latest"
    specific_versions: tuple[int, ...] = ()  # for "specific"
    version_labels: dict = field(default_factory=dict)  # label -> version


def entries_from_config(config) -> list[ModelEntry]:
    """ModelEntries from a `ModelServerConfig` (tensorflow_serving.config) message."""
    if config.WhichOneof("config") != "model_config_list":
        raise ValueError("model config file must hold a model_config_list")
    entries = []
    for mc in config.model_config_list.config:
        if not mc.name or not mc.base_path:
            raise ValueError("every model config needs a name and a base_path")
        if mc.model_platform and mc.model_platform != "tensorflow":
            raise ValueError(f"model {mc.name}: model_platform {mc.model_platform!r} is not served (tensorflow only)")
        which = mc.model_version_policy.WhichOneof("policy_choice")
        entries.append(ModelEntry(
            name=mc.name, base_path=Path(mc.base_path),
            policy=which or "latest",
            num_versions=mc.model_version_policy.latest.num_versions or 1 if which in (None, "latest") else 1,
            specific_versions=tuple(mc.model_version_policy.specific.versions),
            version_labels=dict(mc.version_labels),
        ))
    names = [e.name for e in entries]
    if len(set(names)) != len(names):
        raise ValueError(f"model names must be unique; got {names}")
    return entries


def versions_on_disk(base_path: Path) -> list[int]:
    """Integer-named version directories that hold a complete SavedModel, ascending."""
    if not base_path.is_dir():
        return []
    found = []
    for child in base_path.iterdir():
        if child.name.isdigit() and (child / "saved_model.pb").is_file():
            found.append(int(child.name))
    return sorted(found)


def aspired_versions(entry: ModelEntry, on_disk: list[int]) -> list[int]:
    """The versions the entry's policy wants served, ascending."""
    if entry.policy == "all":
        return list(on_disk)
    if entry.policy == "specific":
        return [v for v in on_disk if v in entry.specific_versions]
    return on_disk[-entry.num_versions:] if on_disk else []


class ModelSource(Generic[Version]):
    """The loaded versions of every model, refreshed by a polling thread."""

    def __init__(self, entries: list[ModelEntry], load: Callable[[ModelEntry, int], Version],
                 poll_wait_s: float) -> None:
        self.entries = {e.name: e for e in entries}
        self._load = load
        self._poll_wait_s = poll_wait_s
        self._served: dict[str, dict[int, Version]] = {e.name: {} for e in entries}
        self._failed: dict[str, dict[int, str]] = {e.name: {} for e in entries}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # one refresh at a time

    def refresh(self) -> None:
        """List every base path once; load new aspired versions, then unload the ones no longer aspired."""
        with self._lock:
            for entry in self.entries.values():
                self._refresh_one(entry)

    def _refresh_one(self, entry: ModelEntry) -> None:
        aspired = aspired_versions(entry, versions_on_disk(entry.base_path))
        current = self._served[entry.name]
        loaded = dict(current)
        for version in aspired:
            if version in loaded or version in self._failed[entry.name]:
                continue
            try:
                loaded[version] = self._load(entry, version)
                log.info("model %s: version %d loaded from %s", entry.name, version, entry.base_path / str(version))
            except Exception as exc:  # a broken version dir must not take the server down
                self._failed[entry.name][version] = f"{type(exc).__name__}: {exc}"
                log.error("model %s: version %d failed to load: %s", entry.name, version, exc)
        if not any(v in loaded for v in aspired):
            self._served[entry.name] = loaded  # keep serving what we have rather than nothing
            return
        kept = {v: m for v, m in loaded.items() if v in aspired}
        self._served[entry.name] = kept  # one assignment: readers see old or new, never half
        for version, model in loaded.items():
            if version not in kept:
                model.unload()
                log.info("model %s: version %d unloaded", entry.name, version)

    def start(self) -> None:
        """Start polling in a daemon thread (after a first synchronous refresh)."""
        self._thread = threading.Thread(target=self._poll, name="model-source", daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.wait(self._poll_wait_s):
            try:
                self.refresh()
            except Exception as exc:  # keep polling; the next round may see a finished directory
                log.error("model source poll failed: %s", exc)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def versions(self, name: str) -> dict[int, Version]:
        """Served versions of `name` (empty when unknown)."""
        return self._served.get(name, {})

    def failures(self, name: str) -> dict[int, str]:
        return dict(self._failed.get(name, {}))

    def resolve(self, name: str, version: int | None = None, label: str | None = None) -> Version:
        """The version a request asks for; NOT_FOUND / INVALID_ARGUMENT worded as TF Serving's manager does."""
        served = self._served.get(name)
        if label:
            entry = self.entries.get(name)
            if entry is None or label not in entry.version_labels:
                raise ServingError("INVALID_ARGUMENT", f"Unrecognized servable version label: {label}")
            version = entry.version_labels[label]
        if version is None:
            if not served:
                raise ServingError("NOT_FOUND", f"Servable not found for request: Latest({name})")
            return served[max(served)]
        return self.loaded(name, version)

    def loaded(self, name: str, version: int) -> Version:
        """A version already resolved (the device owner gets its frontend's): no label or latest rule applied
        again; NOT_FOUND as TF Serving's manager words it when that version is not loaded (or no longer)."""
        model = self._served.get(name, {}).get(version)
        if model is None:
            raise ServingError("NOT_FOUND", f"Servable not found for request: Specific({name}, {version})")
        return model
