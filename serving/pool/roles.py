"""Where a started process begins: its role's module is imported there and only there.

The supervisor names this function as every child's target, so it never loads the server, TensorFlow or a
model runtime itself (a spawned child imports its target's module first).

Not for: what each role does (`serving.pool.frontend`, `serving.pool.owner`).
"""

from __future__ import annotations

from serving.pool.control import Role


def child_main(role: Role, *args) -> None:
    """Run the frontend or the owner with the arguments the supervisor gave."""
    if role == Role.OWNER:
        from serving.pool.owner import owner_main

        owner_main(*args)
    else:
        from serving.pool.frontend import frontend_main

        frontend_main(*args)


__all__ = ["child_main"]
