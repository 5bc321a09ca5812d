"""The generation toolkit: what every stage that asks a model for text shares.

The regenerate-check-reject loop (:mod:`~memoryquest.generation.regeneration`),
the small shared checks and parsing (:mod:`~memoryquest.generation.common`), the
count rule held to a setting's bounds (:mod:`~memoryquest.generation.bounds`) and
the ledger of what a user has already said (:mod:`~memoryquest.generation.ledger`).
The stages (:mod:`memoryquest.stages`), long-term memory (:mod:`memoryquest.memory`)
and PGR (:mod:`memoryquest.pgr`) import it; it imports none of them
(docs/architecture.md, ``tests/test_architecture.py``).

This ``__init__`` imports nothing on purpose, as ``stages/__init__`` does: whatever it
imported would enter the cache fingerprint of every stage that uses one of its modules
(:mod:`memoryquest.fingerprint`).
"""
