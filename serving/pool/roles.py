"""Where a started process begins: it is readied for its role, then its role's module is imported there.

The supervisor names `child_main` as every child's target, so it never loads the server, TensorFlow or a
model runtime itself (a spawned child imports its target's module first). `prepare_role` runs before the
role's module is imported, since that import reaches TensorFlow's protos (and, unprepared, TensorFlow's
runtime, which imports Keras with whatever backend the environment names):
- the owner, and a frontend that runs the model itself (no owner), get their runtime set up
  (`serving.server.runtimes.prepare_process`), whatever `KERAS_BACKEND` says;
- a frontend with an owner never runs the model: TensorFlow's protos only, no runtime, no Keras.

Not for: what each role does (`serving.pool.frontend`, `serving.pool.owner`).
"""

from __future__ import annotations

from serving.pool.control import Role
from serving.protocol.generated import use_protos_without_runtime
from serving.server.runtimes import prepare_process


def runs_model(role: Role, owner: object) -> bool:
    """Whether a child of this role runs the model: the owner, or a frontend without one (`owner` None)."""
    return role == Role.OWNER or owner is None


def prepare_role(role: Role, backend: str, owner: object) -> None:
    """Ready this process for its role before anything imports TensorFlow or Keras."""
    if runs_model(role, owner):
        prepare_process(backend)
    else:
        use_protos_without_runtime()


def child_main(role: Role, *args) -> None:
    """Run the frontend or the owner with the arguments the supervisor gave (the flags first; a frontend's
    third is its owner, None without one)."""
    flags = args[0]
    prepare_role(role, flags.backend, None if role == Role.OWNER else args[2])
    if role == Role.OWNER:
        from serving.pool.owner import owner_main

        owner_main(*args)
    else:
        from serving.pool.frontend import frontend_main

        frontend_main(*args)


__all__ = ["child_main", "prepare_role", "runs_model"]
