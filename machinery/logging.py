"""Structured JSON logging for every kplane process.

One line per event on stderr: ``{"ts": ..., "level": ..., "component": ..., "event": ..., ...}``.
Log an event name and fields (``log.info("pod_bound", pod=..., node=...)``), never prose with
values pasted in. ``kplane up`` sends each component's stderr to ``<data-dir>/logs/<name>.log``.
"""

from __future__ import annotations

import logging
import sys

import structlog

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def setup_logging(component: str, level: str = "info") -> structlog.typing.FilteringBoundLogger:
    """Configure structlog for this process and return its root logger bound to ``component``."""
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True, key="ts"),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(sort_keys=False),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS.get(level, logging.INFO)),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    structlog.contextvars.bind_contextvars(component=component)
    return get_logger()


def get_logger(**fields: object) -> structlog.typing.FilteringBoundLogger:
    # structlog.get_logger() is typed Any: the wrapper_class configured above is what it returns.
    logger: structlog.typing.FilteringBoundLogger = structlog.get_logger()
    return logger.bind(**fields) if fields else logger
