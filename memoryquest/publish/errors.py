"""Why a dataset was not published, or a published one cannot be read."""

from __future__ import annotations

from memoryquest.audit import AuditReport


class PublishError(ValueError):
    pass


class AuditFailedError(PublishError):
    """The dataset failed its validity audit; nothing was published."""

    def __init__(self, report: AuditReport) -> None:
        self.report = report
        super().__init__(
            "refusing to publish: the validity audit failed — "
            + "; ".join(report.failures)
            + " (run `memoryquest audit DIR` for the details; --allow-failed-audit publishes anyway and says so on the card)"
        )
