"""Prefect entrypoint for deployments: ``flows/generate.py:generate_benchmark``.

The flow itself lives in :mod:`memoryquest.orchestration.flow`; this file only
exposes it where ``prefect.yaml`` and ``prefect deploy`` look for it.
"""

from memoryquest.orchestration.flow import generate_benchmark

__all__ = ["generate_benchmark"]

if __name__ == "__main__":
    import asyncio

    asyncio.run(generate_benchmark())
