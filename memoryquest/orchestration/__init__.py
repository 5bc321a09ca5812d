"""The run machinery: how a generation run is set up, walked and spread, apart from what it makes.

* :mod:`~memoryquest.orchestration.flow`: the Prefect flow and its one task per persona × stage
  group (the entrypoint ``flows/generate.py`` serves);
* :mod:`~memoryquest.orchestration.lifecycle`: a run's setup and teardown (settings, output lock,
  personas, client, manifest, save, audit and publish);
* :mod:`~memoryquest.orchestration.output_lock`: one run at a time per output directory;
* :mod:`~memoryquest.orchestration.spread`, :mod:`~memoryquest.orchestration.shards`,
  :mod:`~memoryquest.orchestration.dask_personas`: one run over Prefect workers or a Dask cluster;
* :mod:`~memoryquest.orchestration.task_results`, :mod:`~memoryquest.orchestration.task_retries`:
  what a task stores for a resumed run and which failures Prefect retries;
* :mod:`~memoryquest.orchestration.deployment_source`: the deployments' pull step (the code a worker runs);
* :mod:`~memoryquest.orchestration.lockstep`: personas kept at the same stage group, so Batch API
  rounds do not grow with their number;
* :mod:`~memoryquest.orchestration.prefect_defaults`: quiet, offline Prefect, applied before
  anything else is imported.

This file imports nothing: ``memoryquest/__init__.py`` applies Prefect's defaults from here first.
"""
