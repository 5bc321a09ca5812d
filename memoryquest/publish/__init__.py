"""Publish a generated dataset as Hugging Face–style Parquet splits, and read it back.

Layout of a published dataset::

    README.md                                  dataset card (YAML configs, statistics, licence)
    LICENSE.md                                 CC BY-NC 4.0 text (PersonaLens' licence)
    manifest.json                              run manifest + publish info (splits, row counts, sha256)
    data/<config>/<split>-00000-of-00001.parquet   one config per table of memoryquest.contracts.TABLES
    jsonl/<config>/<split>.jsonl               the same rows as JSON Lines
    plots/*.png                                figures embedded in the card
    explorer/                                  static viewer (ground truth included: not for a system under test)
    pgr.winrate.json                           answer-level Win Rate report, when one was given
    evaluation/NAME.run.json                   the record of the `pgr run` the card shows, when one was given
    evaluation/NAME.calibration.json           and its judges' calibration

A memory system under test reads only ``history``, ``queries`` and ``facts``
(:data:`~memoryquest.contracts.READABLE_TABLES`; :func:`load_readable` reads nothing
else); ``session_labels``, ``query_labels`` and ``fact_labels`` are their answer key,
joined back by :func:`load_published` for scoring.

The whole directory is built next to the destination and renamed into place,
so readers see the previous dataset or the new one, never a mix.

The Win Rate report of ``memoryquest pgr run --win-rate`` is not part of the
generated tables: it lives beside them as ``pgr.winrate.json``
(:data:`WIN_RATE_FILE`, where ``pgr run`` writes it without ``--output``), or
wherever ``--output`` put it. :func:`read_win_rate_report` reads and checks it;
``publish_dataset(..., win_rates=...)`` shows it in the card and the explorer
and keeps a copy at the root, where ``memoryquest explore`` finds it again.

A whole ``memoryquest pgr run`` (:func:`~memoryquest.pgr.run_record.read_evaluation_run`
of its record, ``NAME.run.json``) given as ``publish_dataset(..., evaluation=...)``
puts every baseline at PGR's budget and each judge's measured error in the card,
under the run's name; its record and calibration are kept in ``evaluation/``.

Where the code is: :mod:`~memoryquest.publish.writer` writes a dataset in this layout,
:mod:`~memoryquest.publish.readers` reads it back, :mod:`~memoryquest.publish.layout` names its
files and keys; the card is :mod:`~memoryquest.publish.card` and its ``card_*`` sections, the
explorer :mod:`~memoryquest.publish.explorer`.
"""

from memoryquest.pgr.winrate_contracts import WIN_RATE_FILE
from memoryquest.publish.errors import AuditFailedError, PublishError
from memoryquest.publish.layout import PRIMARY_KEYS, PublishedFile, PublishReport
from memoryquest.publish.readers import load_published, load_readable, read_win_rate_report
from memoryquest.publish.writer import publish_dataset

__all__ = [
    "PRIMARY_KEYS",
    "AuditFailedError",
    "PublishError",
    "PublishReport",
    "PublishedFile",
    "WIN_RATE_FILE",
    "load_published",
    "load_readable",
    "publish_dataset",
    "read_win_rate_report",
]
