"""Where a run's tasks run.

- ``cluster``: this machine's process pool, the report file a worker opens, its IPU shards;
- ``daskexec``: the Dask cluster's executor (each IPU's tasks to its home workers), an
  optional extra (``pip install -e '.[cluster]'``);
- ``executors``: ``make_executor``, the pool or Dask as ``--scheduler`` asks.
"""
