"""The state file: what `make serve-*` started, and where, for `make loadtest` to read.

One JSON file (default `.state/servers.json`, overridable with `$SERVING_STATE_FILE`) holding
one record per running server, keyed by its name (`cpu`, `gpu`, ...). Written atomically
(temporary file, then rename) so a reader never sees half a file.

Not for: starting or stopping servers (see `serving.deploy.launcher`).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

from serving.endpoint import ServedEndpoint

DEFAULT_STATE_FILE = Path(".state/servers.json")


def state_file_path() -> Path:
    return Path(os.environ.get("SERVING_STATE_FILE", DEFAULT_STATE_FILE))


def read_state(path: Path | None = None) -> dict[str, ServedEndpoint]:
    """All recorded servers by name; an absent file means none."""
    path = path or state_file_path()
    if not path.exists():
        return {}
    try:
        raw = json.loads(path.read_text())
        return {name: ServedEndpoint(**record) for name, record in raw.items()}
    except (ValueError, TypeError) as exc:
        raise ValueError(f"state file {path} is corrupt ({exc}); run `make stop` to clear it") from exc


def write_state(servers: dict[str, ServedEndpoint], path: Path | None = None) -> None:
    """Replace the state file with `servers` atomically; an empty dict removes the file."""
    path = path or state_file_path()
    if not servers:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps({name: asdict(s) for name, s in servers.items()}, indent=2, sort_keys=True))
    os.replace(tmp, path)
