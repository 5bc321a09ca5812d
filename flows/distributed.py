"""Prefect entrypoints beyond one machine.

* ``flows/distributed.py:generate_sharded`` — shards the personas over the
  work pool's workers through the generation deployment;
* ``flows/distributed.py:generate_with_dask`` — one task per persona on a
  Dask cluster (``scheduler_address``) through prefect-dask.

The flows live in :mod:`memoryquest.distributed`; this file only exposes
them where ``prefect.yaml`` and ``prefect deploy`` look for them.
"""

from memoryquest.distributed import generate_sharded, generate_with_dask

__all__ = ["generate_sharded", "generate_with_dask"]
