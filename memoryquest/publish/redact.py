"""Keep credentials out of everything that gets published.

The run manifest records the settings in force; a generator that stored them
unmasked, or a base URL with a key in it, must not leak a secret into a public
dataset. The rules live in :mod:`memoryquest.redaction`, shared with the
client layer; this module keeps the publishing names.
"""

from __future__ import annotations

from memoryquest.redaction import MASK, is_secret_key, redact, redact_text, redact_url

__all__ = ["MASK", "is_secret_key", "redact", "redact_text", "redact_url"]
