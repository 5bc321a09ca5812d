"""Validity audit of a generated dataset (``memoryquest audit``).

A benchmark is only as good as the shortcuts it does not allow. The audit
measures the ones a generator can introduce without breaking any invariant:
reference turns that are recognisable by their wording, queries whose words
already point at their references, templated dialogue, and ground truth that
memory cannot supply or that expired before the query.
"""

from memoryquest.audit.report import AuditCheck, AuditReport, audit_markdown
from memoryquest.audit.run import AuditError, audit_dataset

__all__ = [
    "AuditCheck",
    "AuditError",
    "AuditReport",
    "audit_dataset",
    "audit_markdown",
]
