"""Where a started process begins: it is readied for its role, opens its start record, then runs its role.

The supervisor names `child_main` as every child's target, so it never loads the server, TensorFlow or a
model runtime itself (a spawned child imports its target's module first, and unpickles its argument, a
`Launch`, before the target runs). `prepare_role` runs before the start record is opened or the role's
module imported, since both reach TensorFlow's protos (and, unprepared, TensorFlow's runtime, which imports
Keras with whatever backend the environment names):
- the owner, and a frontend that runs the model itself (no owner), get their runtime set up
  (`serving.server.runtimes.prepare_process`), whatever `KERAS_BACKEND` says;
- a frontend with an owner never runs the model: TensorFlow's protos only, no runtime, no Keras.
Then every child starts the same way: its log format, the event SIGTERM sets, and SIGTERM when the supervisor dies.

Not for: what each role does (`serving.pool.frontend`, `serving.pool.owner`).
"""

from __future__ import annotations

from multiprocessing.connection import Connection

from serving.pool.control import Launch, OwnerStart, follow_parent
from serving.protocol.generated import use_protos_without_runtime
from serving.server.lifecycle import configure_logging, stop_requested
from serving.server.runtimes import prepare_process


def prepare_role(launch: Launch) -> None:
    """Ready this process for its role before anything imports TensorFlow or Keras."""
    if launch.runs_model:
        prepare_process(launch.backend)
    else:
        use_protos_without_runtime()


def child_main(launch: Launch, control: Connection) -> None:
    """Run the frontend or the owner its start record describes, until SIGTERM; `control` carries its
    `ChildReady` back to the supervisor."""
    prepare_role(launch)
    configure_logging(launch.log_level)
    start = launch.open()
    stop = stop_requested()
    follow_parent(start.parent_pid)
    if isinstance(start, OwnerStart):
        from serving.pool.owner import owner_main

        owner_main(start, control, stop)
    else:
        from serving.pool.frontend import frontend_main

        frontend_main(start, control, stop)


__all__ = ["child_main", "prepare_role"]
