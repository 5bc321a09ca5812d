"""A careless model: the simulator's answers, written the way real models go wrong.

Each :class:`Fault` rewrites one kind of answer as real models tend to: a news
sentence that points ahead or announces itself, a reference that echoes the
request's words, a fact that adds an inference, a conversation that contradicts
what the user said before, an assistant that answers in markdown. The wordings
come from a corpus (``memoryquest/testing/data/careless_faults.json``) written
without looking at the gates' word lists, so a catch here says something about a
model that words its faults its own way.

Every planted item is recorded (:class:`Injection`: which fault, which wording,
where). After the run an item counts as caught when it is not in the final
dataset: its candidate was rejected, whatever the reason, or regenerated without
it. The rejections that quote it name the gates that caught it::

    python -m memoryquest.testing.careless --users user0

prints, per fault, injected n, caught n and by which gates (one generation run
per fault, offline). It is a test double beside the simulator, never a production
backend.

Its parts: ``faults`` (the faults, the corpus of their wordings, one planted item), ``backend``
(the simulator that writes them into its answers), ``scoring`` (what became of each item) and
``runs`` (one generation per fault, the table, the command line).
"""
