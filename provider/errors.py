"""The errors the Cluster resource and the API client raise.

They are defined, with the whole tree of the distribution, in :mod:`together_clusters.errors`; this module
names the ones of the provider so ``from together_clusters.provider.errors import NotFoundError`` keeps
working. See that module for what each means.
"""

from __future__ import annotations

from together_clusters.errors import (
    AmbiguousCreateError,
    APIError,
    AuthenticationError,
    ConfigurationError,
    ConflictError,
    InputError,
    NotFoundError,
    ProvisioningFailedError,
    RateLimitError,
    ServerError,
    TogetherError,
    TransportError,
    UnreadableReplyError,
    UntrackedClusterError,
    ValidationError,
    WaitTimeoutError,
    WrongTargetError,
)

__all__ = [
    "APIError",
    "AmbiguousCreateError",
    "AuthenticationError",
    "ConfigurationError",
    "ConflictError",
    "InputError",
    "NotFoundError",
    "ProvisioningFailedError",
    "RateLimitError",
    "ServerError",
    "TogetherError",
    "TransportError",
    "UnreadableReplyError",
    "UntrackedClusterError",
    "ValidationError",
    "WaitTimeoutError",
    "WrongTargetError",
]
