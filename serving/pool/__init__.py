"""The embedded server across processes: gRPC frontends on one port, one device owner, one supervisor.

`python -m serving.server --workers N` (N above 1) lands here: the supervisor (`supervisor`) holds the
port, starts N frontend processes (`frontend`) that share it with SO_REUSEPORT, and, where the model must
run in one process (batching on, so one scheduler batches for the whole server; or a GPU, whose contexts
time-slice), one device owner (`owner`) that receives every frontend's requests through shared memory
(`slab`) and small typed messages (`messages`, `link`). It restarts what dies, sums every process's metrics
on one page (`metrics_sum`), and drains all on SIGTERM. Processes start with spawn: gRPC, TensorFlow and
CUDA do not survive a fork.

Not for: one server process's request handling (`serving.server`), which never imports this package.
"""
