"""The generation stages: plain typed async functions, no orchestration.

The order the stage groups run in, and which module, prompt templates,
simulator module and tests belong to each, is declared once in
:mod:`memoryquest.pipeline`: start reading there.

This ``__init__`` imports nothing on purpose. Importing any stage module runs
it, so whatever it imported would enter every stage's cache fingerprint
(:mod:`memoryquest.fingerprint`), and editing one stage would recompute all.
"""
