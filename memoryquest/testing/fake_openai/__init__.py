"""A loopback OpenAI-compatible server for tests and benchmarks.

It speaks enough of the OpenAI HTTP API for the official SDK
(``POST /v1/chat/completions``, ``POST /v1/embeddings``, ``GET /v1/models``,
and the Batch API: ``POST /v1/files``, ``GET /v1/files/{id}[/content]``,
``POST /v1/batches``, ``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel``)
and answers valid chat requests from the offline simulator: a client with
``endpoint.simulator_hints`` on sends the template id, version, seed and
variables in ``X-MemoryQuest-*`` headers (see ``memoryquest.llm.hints``;
nothing sends the variables by default), and the server replies with
``simulate(template_id, variables, seed)``. ``response_format`` is honoured:
``json_schema`` / ``json_object`` get the bare JSON, a request without one
gets the JSON wrapped in prose and a code fence, as an unconstrained model
would write it.

The server is the stdlib ``ThreadingHTTPServer`` (one thread per connection,
HTTP/1.1 keep-alive) on 127.0.0.1, port 0, run in a background thread::

    with FakeOpenAIServer(latency=0.01) as server:
        settings = Settings(endpoint={"base_url": server.url, "simulator_hints": True, ...})

Its parts, one concern each:

- ``server``: :class:`FakeOpenAIServer`: its settings, routes, test controls and HTTP handler;
- ``loopback``: the threaded loopback HTTP server both fakes run on;
- ``exchange``: a logged request, a route's reply, and the errors a route answers with;
- ``faults``: the kinds of fault a test injects;
- ``admission``: the API key, the requests/min limit and the fault each request draws;
- ``chat``: chat completions from the simulator, prompt caching, a test's own answers;
- ``embeddings``: the hashed bag-of-words embeddings;
- ``batches``: the Files and Batches endpoints;
- ``replay``: :class:`ReplayOpenAIServer`, answering from a recording.
"""
